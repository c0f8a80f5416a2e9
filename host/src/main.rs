use emseepea::config::Config;
use emseepea::runtime::{RequestScope, Runtime, SourceSet};
use std::sync::Arc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("debug,cranelift=warn,wasmtime=warn").init();
    let config = Config::load(std::path::Path::new(&std::env::args().nth(1).unwrap()))?;
    let rt = Arc::new(Runtime::new(&config.runtime)?);
    let t = std::time::Instant::now();
    let set = SourceSet::load(rt, &config).await?;
    println!("loaded in {:?}", t.elapsed());
    let s = &set.sources[0];
    for _ in 0..3 {
        let scope = RequestScope::new(std::time::Instant::now() + std::time::Duration::from_secs(5), "x");
        let ctx = emseepea::runtime::types::CallContext { principal: None, deadline_ms: 0 };
        let t = std::time::Instant::now();
        let page = s.list(None, 50, ctx, &scope).await?;
        println!("{} entries in {:?} {:?}", page.entries.len(), t.elapsed(), page.entries.last().map(|e| &e.resource.uri));
    }
    Ok(())
}

//! `emseepea check`: load and validate the config and every source, print a
//! table, fail on any problem.

use crate::config::Config;
use std::fmt::Write;

pub async fn run(config: Config) -> anyhow::Result<()> {
    let loaded = crate::server::load(config).await?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<3} {:<20} {:<9} {:<5} {:<9} {:<9} uri template",
        "#", "source", "access", "list", "discover", "cache"
    );
    for (i, s) in loaded.sources.sources.iter().enumerate() {
        let d = &s.definition;
        let _ = writeln!(
            out,
            "{:<3} {:<20} {:<9} {:<5} {:<9} {:<9} {}",
            i + 1,
            d.name,
            format!("{:?}", d.access).to_lowercase(),
            if s.lists() { "yes" } else { "no" },
            if d.discoverable { "yes" } else { "no" },
            s.cache.to_string(),
            d.uri_template.as_str()
        );
    }
    let _ = writeln!(
        out,
        "{} source(s), {} static resource(s): ok",
        loaded.sources.sources.len(),
        loaded.statics.items.len()
    );
    print!("{out}");
    Ok(())
}

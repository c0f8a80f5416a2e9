//! Wiring and lifecycle: load everything the config names, bind, serve,
//! and shut down gracefully on SIGINT/SIGTERM.

use crate::admin::{self, Health, Phase};
use crate::auth::config::AuthMethod;
use crate::auth::{Auth, Credentials};
use crate::config::Config;
use crate::inventory::{CursorKeys, Pager, StaticResources, SystemClock};
use crate::listener::{
    AcceptFailures, ConnectionLimits, RateLimitedLog, YieldingStream, repoll_self_wakes,
};
use crate::mcp::model::template_listing;
use crate::mcp::session::{SessionLimits, Sessions};
use crate::mcp::{App, pipeline};
use crate::runtime::{Access, Runtime, SourceSet};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio_util::task::AbortOnDropHandle;

/// Everything loaded and validated, not yet listening.
pub struct Loaded {
    pub config: Config,
    pub runtime: Arc<Runtime>,
    pub sources: SourceSet,
    pub statics: StaticResources,
    /// The verifier's key material (dev secret, JWKS), loaded first.
    pub credentials: Credentials,
}

/// Load and validate the config's sources and static resources. Any problem
/// is one line naming the file and the reason. Everything that needs only
/// the config (credentials, static resources) is checked before the first
/// component is compiled, which can take minutes for interpreted guests.
pub async fn load(config: Config) -> anyhow::Result<Loaded> {
    let credentials = Credentials::load(&config.auth, &config.state_dir)
        .await
        .map_err(|e| anyhow::anyhow!("{}: [auth]: {e}", config.file.display()))?;
    let statics = StaticResources::load(&config.resources)
        .map_err(|e| anyhow::anyhow!("{}: {e}", config.file.display()))?;
    let runtime = Arc::new(Runtime::new(&config.runtime)?);
    let sources = SourceSet::load(runtime.clone(), &config).await?;
    // Each source's `describe()` left its pool slot's memory resident (up to
    // `keep_resident_bytes`, kept for the next call). Nothing serves yet, so
    // giving it back cannot make a concurrent instantiation find the pool
    // exhausted (what `release_idle_pool_memory` warns of).
    let pool_released = runtime.engine().release_idle_pool_memory();
    tracing::debug!(pool_released, "idle pool memory released after startup");
    // Compiling was the peak; what it freed goes back to the OS.
    crate::release_free_memory();
    // A URI names exactly one owner, so a read reaches the source that listed it.
    crate::inventory::ownership::check(&sources.sources, &statics, &config.file)?;
    let needs_auth = sources.any_lists()
        || sources
            .sources
            .iter()
            .any(|s| s.definition.access == Access::Protected)
        || statics.items.iter().any(|s| s.access == Access::Protected);
    if needs_auth && matches!(config.auth.method, AuthMethod::None) {
        anyhow::bail!(
            "{}: protected templates, inventory sources or protected resources need authentication: set [auth] mode (\"dev\", \"jwt\" or \"introspection\")",
            config.file.display()
        );
    }
    Ok(Loaded {
        config,
        runtime,
        sources,
        statics,
        credentials,
    })
}

/// The union of every scope a template or static resource requires.
fn all_scopes(loaded: &Loaded) -> Vec<String> {
    let mut scopes: Vec<String> = loaded
        .sources
        .sources
        .iter()
        .flat_map(|s| s.definition.required_scopes.iter().cloned())
        .chain(
            loaded
                .statics
                .items
                .iter()
                .flat_map(|s| s.required_scopes.iter().cloned()),
        )
        .collect();
    scopes.sort();
    scopes.dedup();
    scopes
}

/// The canonical resource URL: configured, or derived from the bound address.
pub fn resource_url(config: &Config, bound: SocketAddr) -> String {
    config
        .auth
        .resource
        .clone()
        .unwrap_or_else(|| format!("http://{bound}{}", config.http.endpoint))
}

fn origin_and_path(url: &str) -> (String, String) {
    match url
        .find("://")
        .and_then(|i| url[i + 3..].find('/').map(|j| i + 3 + j))
    {
        Some(p) => (url[..p].to_owned(), url[p..].to_owned()),
        None => (url.to_owned(), String::new()),
    }
}

/// `emseepea stdio`: load the config's sources and serve one client on
/// stdin/stdout.
pub async fn stdio(config: Config) -> anyhow::Result<()> {
    let credentials = crate::mcp::stdio::Credentials::from_env()?;
    let listen = config.listen;
    let loaded = load(config).await?;
    // The resource URL (the tokens' audience) is the one `serve` would use,
    // so a token minted by `emseepea token --config` works here too.
    let app = Arc::new(build_app(loaded, listen).await?);
    crate::mcp::stdio::serve(app, credentials).await
}

pub async fn build_app(loaded: Loaded, bound: SocketAddr) -> anyhow::Result<App> {
    let resource = resource_url(&loaded.config, bound);
    let scopes = all_scopes(&loaded);
    let Loaded {
        config,
        sources,
        statics,
        credentials,
        ..
    } = loaded;
    let auth = Auth::with_credentials(&config.auth, credentials, resource.clone(), scopes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", config.file.display()))?;
    if matches!(config.auth.method, AuthMethod::Dev) {
        tracing::warn!(
            "auth mode \"dev\": tokens are minted by `emseepea token` with a local secret; never use this in production"
        );
    }
    let keys = Arc::new(CursorKeys::new(Arc::new(SystemClock)));
    let statics = Arc::new(statics);
    let listing_sources: Vec<_> = sources
        .sources
        .iter()
        .filter(|s| s.lists())
        .cloned()
        .collect();
    let pager = Pager::new(
        statics.clone(),
        listing_sources,
        keys.clone(),
        sources.fingerprint,
        config.list_pagination.page_size,
        config.page_byte_limit(),
    );
    let definitions: Vec<_> = sources.sources.iter().map(|s| &s.definition).collect();
    let template_listing = template_listing(&definitions);
    let (resource_origin, _) = origin_and_path(&resource);
    let (_, metadata_path) = origin_and_path(&auth.metadata_url);
    let http = &config.http;
    let sessions = Sessions::new(SessionLimits {
        max: http.max_sessions,
        per_principal: http.max_sessions_per_principal,
        anonymous: http.max_anonymous_sessions,
        idle_timeout: Duration::from_secs(http.session_idle_timeout_s),
    });
    Ok(App {
        loopback: bound.ip().is_loopback(),
        resource_origin,
        metadata_path,
        sessions,
        auth,
        keys,
        template_listing,
        pager,
        statics,
        sources,
        config: config.mcp(),
    })
}

/// Serve until SIGINT/SIGTERM, then stop accepting, let in-flight requests
/// finish within the grace period, and return.
pub async fn serve(config: Config, listen: Option<SocketAddr>) -> anyhow::Result<()> {
    let addr = listen.unwrap_or(config.listen);
    let admin_listen = config.admin.listen;
    let loaded = load(config).await?;
    let health = Arc::new(Health::default());
    // The admin listener comes up first so that probes see "starting"
    // rather than a refused connection.
    let _admin = match admin_listen {
        Some(a) => {
            let admin = admin::bind(a, addr).await?;
            tracing::info!(admin = %admin.local_addr()?, "admin listener up");
            Some(AbortOnDropHandle::new(tokio::spawn(admin::serve(
                admin,
                health.clone(),
            ))))
        }
        None => None,
    };
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    let workers_config = loaded.config.workers;
    let idle_trim_s = loaded.config.runtime.idle_trim_s;
    let app = Arc::new(build_app(loaded, bound).await?);
    // After loading: compiling uses `block_in_place`, which hands a worker's
    // core to a new thread, and a plan made before would pin the old one.
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let placement = crate::workers::place(workers_config.pin, workers);
    let yield_after_us = workers_config.yield_after_us;
    crate::workers::take_turns(Duration::from_micros(yield_after_us.into()));
    tracing::info!(workers, yield_after_us, "worker threads {placement}");
    let grace = Duration::from_millis(app.config.http.shutdown_grace_ms);
    println!(
        "emseepea listening on http://{bound}{}",
        app.config.http.endpoint
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tracing::info!(%bound, sources = app.sources.sources.len(), "serving");
    let _trimmer = trim_idle_sources(app.clone(), idle_trim_s);
    let _sweeper = expire_warm_instances(app.clone());
    health.set(Phase::Ready);

    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown_signal());
    let limits = ConnectionLimits::new(
        app.config.http.max_connections,
        app.config.http.max_connections_per_peer,
        crate::listener::PeerPrefixes {
            v4: app.config.http.peer_ipv4_prefix,
            v6: app.config.http.peer_ipv6_prefix,
        },
        app.sources.runtime.open_connections(),
    );
    let mut failures = AcceptFailures::default();
    let mut refusals = RateLimitedLog::new(crate::listener::accept::ACCEPT_LOG_INTERVAL);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => {
                        failures.succeeded();
                        x
                    }
                    Err(e) => {
                        let pause = failures.failed(&e, Instant::now());
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                };
                let guard = match limits.admit(peer.ip().to_canonical()) {
                    Ok(guard) => guard,
                    Err(why) => {
                        if let Some(n) = refusals.hit(Instant::now()) {
                            tracing::warn!(
                                refused = n,
                                "closed {n} connection(s) at once since the last report, latest from {}: {why}",
                                peer.ip()
                            );
                        }
                        // Closed before anything is read: no buffer, no task.
                        drop(stream);
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let app = app.clone();
                let peer_addr = pipeline::PeerAddr(peer.ip());
                let service = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(peer_addr);
                    let app = app.clone();
                    async move { Ok::<_, std::convert::Infallible>(pipeline::handle(app, req).await) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(30))
                    .serve_connection(TokioIo::new(YieldingStream::new(stream)), service);
                let conn = graceful.watch(conn);
                // Its own wakes (hyper's body hand-over) polled here, not
                // handed to another worker (`listener::self_wakes`).
                tokio::spawn(repoll_self_wakes(async move {
                    let _guard = guard;
                    if let Err(e) = conn.await {
                        tracing::debug!("connection ended: {e}");
                    }
                }));
            }
            _ = &mut shutdown => break,
        }
    }
    // /readyz answers 503 from here on, so a proxy stops sending while
    // in-flight requests finish; /healthz and /metrics keep answering.
    health.set(Phase::Draining);
    drop(listener);
    tracing::info!(
        "shutting down: no new connections; waiting up to {grace:?} for in-flight requests"
    );
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections closed"),
        _ = tokio::time::sleep(grace) => tracing::warn!("grace period over; dropping remaining requests"),
    }
    Ok(())
}

/// Every few seconds, trim the sources idle for `runtime.idle_trim_s`
/// (`runtime::trim`) and sample what the pool's idle slots hold; the task
/// ends with `serve`. Off when `idle_trim_s` is 0.
fn trim_idle_sources(app: Arc<App>, idle_trim_s: u64) -> Option<AbortOnDropHandle<()>> {
    let idle = Duration::from_secs(idle_trim_s);
    if idle.is_zero() {
        return None;
    }
    let every = (idle / 3).clamp(Duration::from_secs(1), Duration::from_secs(10));
    Some(AbortOnDropHandle::new(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let app = app.clone();
            // Reading and deserializing an artifact blocks.
            let _ = tokio::task::spawn_blocking(move || {
                let trimmed = app.sources.trim_idle(idle);
                if trimmed > 0 {
                    tracing::debug!(trimmed, "idle sources trimmed");
                }
            })
            .await;
        }
    })))
}

/// Drop the instances kept for callers who did not come back within
/// `runtime.warm_idle_ms` (`runtime::warm`), so an idle server holds none of
/// them for long; the task ends with `serve`. Off when nothing is kept.
fn expire_warm_instances(app: Arc<App>) -> Option<AbortOnDropHandle<()>> {
    let every = app.sources.runtime.warm_sweep_period()?;
    Some(AbortOnDropHandle::new(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let expired = app.sources.runtime.expire_warm_instances();
            if expired > 0 {
                tracing::debug!(expired, "idle kept instances dropped");
            }
        }
    })))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}

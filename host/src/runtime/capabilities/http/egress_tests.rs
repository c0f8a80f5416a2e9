//! The outbound HTTP hook in-process, with a resolver and a connector the
//! test controls: DNS rebinding, peer verification and the address check,
//! at the layer a guest's `outgoing-handler.handle` reaches.

use super::network::{Connect, Connecting, Network, Resolve, Resolving};
use super::{EgressHooks, HttpGrants, Origin};
use crate::runtime::capabilities::http::config::HttpGrantLimits;
use http_body_util::BodyExt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmtime_wasi_http::{Error, WasiHttpHooks};

/// A public address nothing in the test listens on (the connector below
/// never really dials it).
const PUBLIC: &str = "93.184.216.34";

/// A loopback-only service: counts connections and requests (a request is
/// a connection that sent a complete head), keeps every first flight of
/// bytes (a request head, or a TLS ClientHello), answers every request with
/// `reply`.
struct Backend {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Backend {
    async fn start(reply: &'static str) -> Backend {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (c, r, got) = (connections.clone(), requests.clone(), received.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (r, got) = (r.clone(), got.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                        // A ClientHello has no blank line: keep what came.
                        if head.first() == Some(&0x16) {
                            break;
                        }
                    }
                    let complete = head.windows(4).any(|w| w == b"\r\n\r\n");
                    if !head.is_empty() {
                        got.lock().unwrap().push(head);
                    }
                    if !complete {
                        return;
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    let _ = sock.write_all(reply.as_bytes()).await;
                });
            }
        });
        Backend {
            addr,
            connections,
            requests,
            received,
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    fn received(&self) -> Vec<Vec<u8>> {
        self.received.lock().unwrap().clone()
    }
}

const SECRET: &str = "HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nsecret";

/// Answers `first` the first time a name is asked, `then` every later time
/// (a TTL-0 rebinding answer), and counts the questions.
struct Rebinding {
    first: Vec<IpAddr>,
    then: Vec<IpAddr>,
    asked: AtomicUsize,
}

impl Rebinding {
    fn new(first: &[&str], then: &[&str]) -> Arc<Rebinding> {
        let ips = |s: &[&str]| s.iter().map(|a| a.parse().unwrap()).collect();
        Arc::new(Rebinding {
            first: ips(first),
            then: ips(then),
            asked: AtomicUsize::new(0),
        })
    }
}

impl Resolve for Rebinding {
    fn resolve<'a>(&'a self, _host: &'a str) -> Resolving<'a> {
        let answer = match self.asked.fetch_add(1, Ordering::SeqCst) {
            0 => self.first.clone(),
            _ => self.then.clone(),
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// Records every address it is asked to dial. Loopback addresses are
/// dialled for real, or (with `land_on`) every dial lands on that address
/// instead, as an interposed path would do; anything else is refused
/// without touching the network.
struct Recording {
    dialed: Mutex<Vec<SocketAddr>>,
    land_on: Option<SocketAddr>,
}

impl Recording {
    fn new(land_on: Option<SocketAddr>) -> Arc<Recording> {
        Arc::new(Recording {
            dialed: Mutex::new(Vec::new()),
            land_on,
        })
    }

    fn dialed(&self) -> Vec<SocketAddr> {
        self.dialed.lock().unwrap().clone()
    }
}

impl Connect for Recording {
    fn connect(&self, addr: SocketAddr) -> Connecting<'_> {
        self.dialed.lock().unwrap().push(addr);
        let target = self.land_on.unwrap_or(addr);
        Box::pin(async move {
            if !target.ip().is_loopback() {
                return Err(std::io::ErrorKind::ConnectionRefused.into());
            }
            tokio::net::TcpStream::connect(target).await
        })
    }
}

fn hooks(origin: &str, resolver: Arc<dyn Resolve>, connector: Arc<dyn Connect>) -> EgressHooks {
    EgressHooks {
        grants: HttpGrants {
            origins: Arc::new(vec![Origin::parse(origin).unwrap()]),
            limits: HttpGrantLimits::default(),
            network: Network {
                resolver,
                connector,
            },
        },
        deadline: Instant::now() + Duration::from_secs(10),
        source: "test".into(),
        request_id: "test".into(),
        in_flight: Default::default(),
        max_in_flight: crate::runtime::capabilities::handles::DEFAULT_MAX_HTTP_REQUESTS,
        memory: Some(crate::runtime::host_state::MemoryAccount::new(64 << 20)),
        refusal_logged: false,
    }
}

/// What the guest would get: the status and body, or the error code.
async fn fetch(hooks: &mut EgressHooks, url: &str) -> Result<(u16, String), Error> {
    let uri: http::Uri = url.parse().unwrap();
    let authority = uri.authority().unwrap().to_string();
    let body = http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    // As wasmtime-wasi-http builds it: absolute URI, Host from the authority.
    let request = http::Request::builder()
        .uri(uri)
        .header(http::header::HOST, authority)
        .body(body)
        .unwrap();
    let sent = hooks.send_request(request, None, Box::new(async { Ok(()) }));
    let (response, io) = Box::into_pin(sent).await?;
    tokio::spawn(Box::into_pin(io));
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The attack of issue 9, item 5: a guest allowed only `rebind.test:P`,
/// whose name answers a public address to the check and 127.0.0.1 after.
/// `127.1` is a name the system resolver also turns into 127.0.0.1, so a
/// host that resolves a second time outside the hook reaches the service
/// with either resolver.
#[tokio::test(flavor = "multi_thread")]
async fn a_rebinding_name_does_not_reach_a_loopback_service() {
    let service = Backend::start(SECRET).await;
    let port = service.addr.port();
    for name in ["127.1", "rebind.test"] {
        let resolver = Rebinding::new(&[PUBLIC], &["127.0.0.1"]);
        let connector = Recording::new(None);
        let mut hooks = hooks(
            &format!("http://{name}:{port}"),
            resolver.clone(),
            connector.clone(),
        );
        let got = fetch(&mut hooks, &format!("http://{name}:{port}/secret")).await;
        assert_eq!(
            service.requests(),
            0,
            "{name}: the loopback service was reached: {got:?}"
        );
        assert!(
            matches!(got, Err(Error::ConnectionRefused)),
            "{name}: {got:?}"
        );
        assert_eq!(
            resolver.asked.load(Ordering::SeqCst),
            1,
            "{name}: resolved once"
        );
        let checked: SocketAddr = format!("{PUBLIC}:{port}").parse().unwrap();
        assert_eq!(
            connector.dialed(),
            [checked],
            "{name}: dialed the checked address only"
        );
    }
}

/// Peer verification, obeyed and violated: the same allowed origin, once
/// over an honest connector and once over one whose connection lands on
/// another port (as an interposed path could). The second is refused
/// before any byte of the request is sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_whose_peer_is_not_the_checked_address_is_refused() {
    let service = Backend::start(SECRET).await;
    let elsewhere = Backend::start(SECRET).await;
    let origin = format!("http://{}", service.addr);
    let url = format!("{origin}/secret");
    let no_dns = Rebinding::new(&[], &[]);

    let mut honest = hooks(&origin, no_dns.clone(), Recording::new(None));
    assert_eq!(
        fetch(&mut honest, &url).await.unwrap(),
        (200, "secret".into())
    );
    assert_eq!(service.requests(), 1);

    let misrouted = Recording::new(Some(elsewhere.addr));
    let mut hooks = hooks(&origin, no_dns.clone(), misrouted.clone());
    let got = fetch(&mut hooks, &url).await;
    assert!(
        matches!(got, Err(Error::DestinationIpProhibited)),
        "{got:?}"
    );
    assert_eq!(misrouted.dialed(), [service.addr]);
    // The connection was made (so the check ran on a real socket) but no
    // request went over it.
    for _ in 0..100 {
        if elsewhere.connections.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(elsewhere.connections.load(Ordering::SeqCst), 1);
    assert_eq!(elsewhere.requests(), 0);
    assert_eq!(service.requests(), 1);
    assert_eq!(
        no_dns.asked.load(Ordering::SeqCst),
        0,
        "a literal address is not resolved"
    );
}

/// The blocks issue 9 found missing, each answered by a name's resolver:
/// refused without dialing; the public address just outside each is dialed.
#[tokio::test(flavor = "multi_thread")]
async fn a_name_answering_a_special_purpose_address_is_refused() {
    for (inside, just_outside) in [
        ("64:ff9b::7f00:1", "2001:200::1"),
        ("::127.0.0.1", "2000::1"),
        ("::ffff:127.0.0.1", "2000::1"),
        ("2002:7f00:1::", "2003::"),
        ("fec0::1", "2000::1"),
        ("192.0.0.1", "192.0.1.0"),
        ("198.18.0.1", "198.20.0.0"),
        ("198.19.255.255", "198.17.255.255"),
        ("240.0.0.1", "223.255.255.255"),
        ("127.0.0.1", "128.0.0.0"),
    ] {
        let refused = Recording::new(None);
        let mut hooks_in = hooks(
            "http://api.test:8080",
            Rebinding::new(&[inside], &[]),
            refused.clone(),
        );
        let got = fetch(&mut hooks_in, "http://api.test:8080/").await;
        assert!(
            matches!(got, Err(Error::DestinationIpProhibited)),
            "{inside}: {got:?}"
        );
        assert!(refused.dialed().is_empty(), "{inside} was dialed");

        let dialed = Recording::new(None);
        let mut hooks_out = hooks(
            "http://api.test:8080",
            Rebinding::new(&[just_outside], &[]),
            dialed.clone(),
        );
        let got = fetch(&mut hooks_out, "http://api.test:8080/").await;
        assert!(
            matches!(got, Err(Error::ConnectionRefused)),
            "{just_outside}: {got:?}"
        );
        let addr = SocketAddr::new(just_outside.parse().unwrap(), 8080);
        assert_eq!(dialed.dialed(), [addr], "{just_outside} was not dialed");
    }
}

/// One non-public answer among public ones refuses the name whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_mixed_answer_is_refused_whole() {
    let connector = Recording::new(None);
    let resolver = Rebinding::new(&[PUBLIC, "127.0.0.1"], &[]);
    let mut hooks = hooks("http://api.test", resolver, connector.clone());
    let got = fetch(&mut hooks, "http://api.test/").await;
    assert!(
        matches!(got, Err(Error::DestinationIpProhibited)),
        "{got:?}"
    );
    assert!(connector.dialed().is_empty());
}

/// `localhost` is the loopback addresses, asked of no resolver.
#[tokio::test(flavor = "multi_thread")]
async fn localhost_is_loopback_without_a_resolver() {
    let service = Backend::start(SECRET).await;
    let port = service.addr.port();
    let resolver = Rebinding::new(&[PUBLIC], &[PUBLIC]);
    let connector = Recording::new(None);
    let mut hooks = hooks(
        &format!("http://localhost:{port}"),
        resolver.clone(),
        connector.clone(),
    );
    let got = fetch(&mut hooks, &format!("http://localhost:{port}/")).await;
    assert_eq!(got.unwrap(), (200, "secret".into()));
    assert_eq!(resolver.asked.load(Ordering::SeqCst), 0);
    assert_eq!(connector.dialed(), [service.addr]);
}

/// The name is kept where it belongs: in the Host header over plain HTTP
/// (with an origin-form request line) and as the TLS server name (SNI)
/// over HTTPS, while the connection goes to the checked address.
#[tokio::test(flavor = "multi_thread")]
async fn the_name_goes_in_host_and_sni_the_address_is_dialed() {
    let service = Backend::start(SECRET).await;
    let port = service.addr.port();
    let no_dns = Rebinding::new(&[], &[]);

    let mut plain = hooks(
        &format!("http://localhost:{port}"),
        no_dns.clone(),
        Recording::new(None),
    );
    fetch(&mut plain, &format!("http://localhost:{port}/a?b=c"))
        .await
        .unwrap();
    let head = String::from_utf8(service.received()[0].clone()).unwrap();
    assert!(head.starts_with("GET /a?b=c HTTP/1.1\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("\r\nhost: localhost:{port}\r\n")),
        "{head}"
    );

    let dialed = Recording::new(None);
    let mut tls = hooks(&format!("https://localhost:{port}"), no_dns, dialed.clone());
    let got = fetch(&mut tls, &format!("https://localhost:{port}/")).await;
    assert!(matches!(got, Err(Error::Tls(_))), "{got:?}");
    assert_eq!(dialed.dialed(), [service.addr]);
    let hello = service.received()[1].clone();
    assert_eq!(hello[0], 0x16, "a TLS handshake record");
    assert!(
        hello.windows(9).any(|w| w == b"localhost"),
        "SNI carries the name"
    );
    assert_eq!(service.requests(), 1, "only the plain request was one");
}

//! A connection's task polled again in place when it wakes itself.
//!
//! hyper hands a request's body to the service through a channel whose
//! receiver, on taking the body, wakes the sender: the connection's own
//! task, since the service runs inside it. tokio treats a task woken during
//! its own poll as a yield: it goes to the back of the run queue and an idle
//! worker is woken to come and steal it. With few clients that is one
//! cross-CPU wake-up, a migration and a relay of further wake-ups per
//! request (perf on the 2-core VM, one client: 1.4 worker notifications per
//! request, 0.73 of them from this; one worker instead of two served 1.15x
//! the pages at 0.7x the CPU). [`repoll_self_wakes`] absorbs such a wake and
//! polls the future again on the spot, a bounded number of times, so
//! a future that keeps waking itself still yields to the scheduler.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Polls in place per poll from the scheduler; past it the wake goes to the
/// scheduler (hyper's own fairness yield, tokio's exhausted budget).
pub const MAX_POLLS_IN_PLACE: u32 = 4;

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const WOKEN_WHILE_POLLING: u8 = 2;

/// Run `future`, polling it again at once whenever it was woken (by itself
/// or by anyone) while it was being polled, at most [`MAX_POLLS_IN_PLACE`]
/// times in a row. Wakes while it is not being polled go to the task.
pub async fn repoll_self_wakes<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let shared = Arc::new(Shared {
        state: AtomicU8::new(IDLE),
        task: Mutex::new(None),
    });
    let waker = Waker::from(shared.clone());
    std::future::poll_fn(move |cx| {
        shared.remember(cx.waker());
        let mut inner = Context::from_waker(&waker);
        for _ in 0..MAX_POLLS_IN_PLACE {
            shared.state.store(POLLING, Ordering::SeqCst);
            if let Poll::Ready(out) = future.as_mut().poll(&mut inner) {
                shared.state.store(IDLE, Ordering::SeqCst);
                return Poll::Ready(out);
            }
            // A wake between the poll's start and here left
            // `WOKEN_WHILE_POLLING`: poll again rather than lose it.
            if shared
                .state
                .compare_exchange(POLLING, IDLE, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return Poll::Pending;
            }
        }
        // Still waking itself: the scheduler runs the others first.
        shared.state.store(IDLE, Ordering::SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

struct Shared {
    state: AtomicU8,
    /// The task's waker, from its latest poll.
    task: Mutex<Option<Waker>>,
}

impl Shared {
    fn remember(&self, waker: &Waker) {
        let mut task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if !task.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *task = Some(waker.clone());
        }
    }
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self.state.compare_exchange(
            POLLING,
            WOKEN_WHILE_POLLING,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            // The poll under way is repeated.
            Ok(_) => {}
            Err(WOKEN_WHILE_POLLING) => {}
            Err(_) => {
                let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some(task) = task {
                    task.wake();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the wakes that reach the task.
    struct Counting(AtomicUsize);
    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_once<F: Future>(f: std::pin::Pin<&mut F>, task: &Arc<Counting>) -> Poll<F::Output> {
        let waker = Waker::from(task.clone());
        f.poll(&mut Context::from_waker(&waker))
    }

    /// Pending for its first `self_wakes` polls, each time waking itself.
    fn waking_itself(self_wakes: u32, polls: Arc<AtomicUsize>) -> impl Future<Output = ()> {
        let mut left = self_wakes;
        std::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::SeqCst);
            if left == 0 {
                return Poll::Ready(());
            }
            left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    #[test]
    fn a_self_wake_is_polled_again_in_place() {
        let task = Arc::new(Counting(AtomicUsize::new(0)));
        let polls = Arc::new(AtomicUsize::new(0));
        let f = pin!(repoll_self_wakes(waking_itself(2, polls.clone())));
        assert!(poll_once(f, &task).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 3);
        assert_eq!(
            task.0.load(Ordering::SeqCst),
            0,
            "the scheduler saw no wake"
        );
    }

    #[test]
    fn a_future_that_keeps_waking_itself_still_yields_to_the_scheduler() {
        let task = Arc::new(Counting(AtomicUsize::new(0)));
        let polls = Arc::new(AtomicUsize::new(0));
        let mut f = pin!(repoll_self_wakes(waking_itself(u32::MAX, polls.clone())));
        assert!(poll_once(f.as_mut(), &task).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), MAX_POLLS_IN_PLACE as usize);
        assert_eq!(task.0.load(Ordering::SeqCst), 1, "woken to run again later");
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_task() {
        let task = Arc::new(Counting(AtomicUsize::new(0)));
        let stored: Arc<Mutex<Option<Waker>>> = Arc::default();
        let s = stored.clone();
        let mut f = pin!(repoll_self_wakes(std::future::poll_fn(move |cx| {
            *s.lock().unwrap() = Some(cx.waker().clone());
            Poll::<()>::Pending
        })));
        assert!(poll_once(f.as_mut(), &task).is_pending());
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        // As the I/O driver would, later and from another thread.
        let w = stored.lock().unwrap().take().unwrap();
        std::thread::spawn(move || w.wake()).join().unwrap();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
    }
}

/// Against hyper itself: one client's requests, with bodies, on one
/// keep-alive connection served by two workers.
#[cfg(test)]
mod with_hyper {
    use super::repoll_self_wakes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::TokioIo;
    use std::io::{Read, Write};

    const REQUESTS: u64 = 200;

    /// Worker parks per request while one client sends `REQUESTS` POSTs in
    /// turn; `wrap` puts the connection's task under `repoll_self_wakes`.
    fn parks_per_request(wrap: bool) -> f64 {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            let service = hyper::service::service_fn(
                |req: hyper::Request<hyper::body::Incoming>| async move {
                    let body = req.into_body().collect().await?.to_bytes();
                    Ok::<_, hyper::Error>(hyper::Response::new(Full::new(body)))
                },
            );
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if wrap {
                tokio::spawn(repoll_self_wakes(conn));
            } else {
                tokio::spawn(conn);
            }
        });
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.set_nodelay(true).unwrap();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let exchange = |client: &mut std::net::TcpStream| {
            client.write_all(request.as_bytes()).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.ends_with(body.as_bytes()) {
                let n = client.read(&mut buf).unwrap();
                assert!(n > 0, "connection closed");
                got.extend_from_slice(&buf[..n]);
            }
        };
        // Warm up (connection accepted, buffers grown), then count.
        for _ in 0..20 {
            exchange(&mut client);
        }
        let metrics = rt.metrics();
        let parks = |m: &tokio::runtime::RuntimeMetrics| -> u64 {
            (0..m.num_workers()).map(|w| m.worker_park_count(w)).sum()
        };
        let before = parks(&metrics);
        for _ in 0..REQUESTS {
            exchange(&mut client);
        }
        (parks(&metrics) - before) as f64 / REQUESTS as f64
    }

    /// Without the wrapper the body hand-over woke the other worker for
    /// every request, which found nothing and parked again: 1.98 parks per
    /// request here (with it: 1.0).
    #[test]
    fn a_lone_clients_request_wakes_one_worker_only() {
        let parks = parks_per_request(true);
        println!("{parks:.2} worker parks per request");
        assert!(parks < 1.3, "{parks:.2} worker parks per request");
    }
}

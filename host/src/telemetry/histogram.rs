//! A histogram whose observations take no lock and share no cache line
//! between threads.
//!
//! prometheus_client's `Histogram` takes a mutex per observation. A page
//! makes seven observations (request time, slot wait, call time, fuel,
//! memory, entries, bytes), each on a lock every worker takes, so each moved
//! a cache line between the cores. Here each thread adds into one of
//! [`SHARDS`] shards of its own (relaxed atomics on lines no other shard
//! touches), and an encode sums the shards. A scrape racing observations
//! may see a sum that does not yet include a counted observation, or the
//! reverse; never a lost one.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shards per histogram; threads beyond it share (correctly, just slower).
const SHARDS: usize = 4;
/// Most finite bounds a histogram may have (the metrics here use <= 20).
const MAX_BOUNDS: usize = 23;

#[derive(Clone, Debug)]
pub struct AtomicHistogram(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Finite, increasing upper bounds; `+Inf` is implicit.
    bounds: Box<[f64]>,
    shards: Box<[Shard; SHARDS]>,
}

/// One thread group's counts, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    /// The f64 sum's bits.
    sum: AtomicU64,
    /// Per bucket (not cumulative); the last is `+Inf`.
    buckets: [AtomicU64; MAX_BOUNDS + 1],
}

impl AtomicHistogram {
    /// A histogram with these upper bounds (non-finite ones are dropped, as
    /// prometheus_client drops them; `+Inf` is always there).
    ///
    /// # Panics
    /// With more than [`MAX_BOUNDS`] finite bounds or bounds not increasing:
    /// a programming error in the metric's definition.
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let bounds: Box<[f64]> = bounds.into_iter().filter(|b| b.is_finite()).collect();
        assert!(bounds.len() <= MAX_BOUNDS, "too many histogram buckets");
        assert!(
            bounds.windows(2).all(|w| w[0] < w[1]),
            "histogram bounds must increase"
        );
        AtomicHistogram(Arc::new(Inner {
            bounds,
            shards: Box::default(),
        }))
    }

    pub fn observe(&self, v: f64) {
        let inner = &*self.0;
        // The first bound >= v (Prometheus buckets are `le`); NaN counts in
        // `+Inf`, as prometheus_client counts it.
        let bucket = inner
            .bounds
            .iter()
            .position(|b| *b >= v)
            .unwrap_or(inner.bounds.len());
        let shard = &inner.shards[shard_of_this_thread()];
        shard.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        // The shard is this thread's (or shared with few), so this
        // compare-and-swap almost never retries.
        let _ = shard
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + v).to_bits())
            });
    }

    /// Sum, count and per-bucket counts (as prometheus_client's encoder
    /// takes them: not cumulative, `+Inf` last).
    fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let inner = &*self.0;
        let mut buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .map(|b| (b, 0))
            .collect();
        let mut sum = 0.0;
        for shard in inner.shards.iter() {
            sum += f64::from_bits(shard.sum.load(Ordering::Relaxed));
            for (total, n) in buckets.iter_mut().zip(&shard.buckets) {
                total.1 += n.load(Ordering::Relaxed);
            }
        }
        let count = buckets.iter().map(|(_, n)| n).sum();
        (sum, count, buckets)
    }
}

/// This thread's shard: threads take them in turn as they first observe.
fn shard_of_this_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

impl TypedMetric for AtomicHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
    use prometheus_client::registry::Registry;

    fn text(register: impl FnOnce(&mut Registry)) -> String {
        let mut r = Registry::default();
        register(&mut r);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        out
    }

    /// Scraped, it is byte for byte what prometheus_client's histogram
    /// would have shown for the same observations.
    #[test]
    fn encodes_as_prometheus_clients_histogram() {
        let bounds = || exponential_buckets(0.0001, 2.0, 20);
        let ours = AtomicHistogram::new(bounds());
        let theirs = Histogram::new(bounds());
        let values = [0.0, 0.0001, 0.00011, 0.003, 1.5, 52.0, 1e9, f64::NAN, -1.0];
        for v in values {
            ours.observe(v);
            theirs.observe(v);
        }
        let a = text(|r| r.register("t", "h", ours.clone()));
        let b = text(|r| r.register("t", "h", theirs.clone()));
        // Everything, the NaN sum and the `+Inf` bucket included.
        assert_eq!(a, b);
        assert!(a.contains("t_count 9"), "{a}");
        assert!(a.contains("t_bucket{le=\"0.0001\"} 3"), "{a}");
    }

    #[test]
    fn sums_and_buckets() {
        let h = AtomicHistogram::new([1.0, 10.0]);
        for v in [0.5, 1.0, 2.0, 10.0, 11.0] {
            h.observe(v);
        }
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(sum, 24.5);
        assert_eq!(count, 5);
        assert_eq!(buckets, vec![(1.0, 2), (10.0, 2), (f64::INFINITY, 1)]);
    }

    /// Threads observing at once lose nothing.
    #[test]
    fn concurrent_observations_are_all_counted() {
        let h = AtomicHistogram::new([1.0, 2.0]);
        std::thread::scope(|s| {
            for t in 0..6 {
                let h = &h;
                s.spawn(move || {
                    for _ in 0..10_000 {
                        h.observe(f64::from(t % 3));
                    }
                });
            }
        });
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 60_000);
        assert_eq!(
            buckets,
            vec![(1.0, 40_000), (2.0, 20_000), (f64::INFINITY, 0)]
        );
        // Two threads each observed 0, 1 and 2.
        assert_eq!(sum, 20_000.0 + 2.0 * 20_000.0);
    }

    #[test]
    #[should_panic(expected = "too many histogram buckets")]
    fn bounds_are_bounded() {
        AtomicHistogram::new((0..30).map(f64::from));
    }
}

//! The controller work queue: per-key dedup, never one key twice at once, delayed adds
//! (requeue-after), per-key exponential backoff plus a global token bucket (rate-limited adds).
//!
//! Modelled on client-go's rate-limited delaying workqueue as controller-runtime configures it
//! (retry delays: `rate_limit::RateLimiter`). Time is `tokio::time::Instant`, so tests can pause the clock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::rate_limit::QueueConfig;
use super::rate_limit::RateLimiter;
use crate::allocator::ShrinkWhenSparse;

/// Longer delays are clamped to this (a `Instant` far in the future without overflow).
const MAX_DELAY: Duration = Duration::from_secs(30 * 365 * 86_400);

/// What a queue key must be; implemented for every type that qualifies.
pub trait QueueKey: Clone + Eq + Hash + Debug + Send + Sync + 'static {}
impl<T: Clone + Eq + Hash + Debug + Send + Sync + 'static> QueueKey for T {}

/// A key waiting in the queue. `seq` is `None` while the key is leased: it is parked and only
/// scheduled when the lease ends.
struct Entry {
    ready_at: Instant,
    seq: Option<u64>,
}

/// Everything behind the queue's lock.
struct State<K> {
    entries: HashMap<K, Entry>,
    schedule: BTreeMap<(Instant, u64), K>,
    leased: HashSet<K>,
    limiter: RateLimiter<K>,
    next_seq: u64,
    adds_total: u64,
    retries_total: u64,
    shutting_down: bool,
}

impl<K: QueueKey> State<K> {
    fn schedule(&mut self, key: K, ready_at: Instant) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.schedule.insert((ready_at, seq), key);
        seq
    }

    /// Whether a waiter should re-check: the entry is ready now or is the new earliest.
    fn wants_wakeup(&self, ready_at: Instant, seq: u64) -> bool {
        ready_at <= Instant::now() || self.schedule.first_key_value().is_some_and(|(first, _)| *first == (ready_at, seq))
    }

    /// Enqueues `key` at `ready_at` (earliest wins); returns whether to wake a waiter.
    fn enqueue(&mut self, key: K, ready_at: Instant) -> bool {
        if self.shutting_down {
            return false;
        }
        if let Some(entry) = self.entries.get(&key) {
            if entry.ready_at <= ready_at {
                return false;
            }
            if let Some(seq) = entry.seq {
                self.schedule.remove(&(entry.ready_at, seq));
            }
        } else {
            self.adds_total += 1;
        }
        let seq = (!self.leased.contains(&key)).then(|| self.schedule(key.clone(), ready_at));
        self.entries.insert(key, Entry { ready_at, seq });
        seq.is_some_and(|seq| self.wants_wakeup(ready_at, seq))
    }

    /// Ends the lease of `key`, scheduling it if it was re-added meanwhile; returns whether to
    /// wake a waiter.
    fn release(&mut self, key: &K) -> bool {
        self.leased.remove(key);
        self.leased.shrink_when_sparse();
        let Some(ready_at) = self.entries.get(key).map(|entry| entry.ready_at) else { return false };
        let seq = self.schedule(key.clone(), ready_at);
        self.entries.get_mut(key).expect("entry just read").seq = Some(seq);
        self.wants_wakeup(ready_at, seq)
    }

    /// Takes the earliest key if it is ready at `now`; `Err` carries the next ready time.
    fn take_ready(&mut self, now: Instant) -> Result<(K, Instant), Option<Instant>> {
        match self.schedule.first_key_value() {
            Some((&(ready_at, _), _)) if ready_at <= now => {
                let (_, key) = self.schedule.pop_first().expect("first entry exists");
                self.entries.remove(&key);
                self.entries.shrink_when_sparse();
                self.leased.insert(key.clone());
                Ok((key, ready_at))
            }
            first => Err(first.map(|(&(ready_at, _), _)| ready_at)),
        }
    }
}

/// What the queue handles and its leases share.
struct Shared<K> {
    state: Mutex<State<K>>,
    notify: Notify,
}

impl<K> Shared<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // Nothing panics half-way through a state update; a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A rate-limited, delaying work queue of keys, shared by N worker tasks (cheap to clone:
/// clones share one queue). Each worker loops on [`WorkQueue::next`] and ends the [`Lease`].
///
/// Contract:
/// - Per-key dedup: a key is waiting at most once; re-adding keeps the earliest ready time.
/// - A leased key is never handed out again before its [`Lease`] ends: adding it marks it
///   dirty and it is scheduled (at its requested ready time) when the lease ends.
/// - Ready keys are handed out in ready-time order; keys with the same ready time in add order.
/// - After [`WorkQueue::shutdown`], adds are ignored and [`WorkQueue::next`] returns `None`.
/// - Metrics in controller-runtime's terms: [`WorkQueue::len`] is `workqueue_depth`,
///   [`WorkQueue::adds_total`] and [`WorkQueue::retries_total`] the counters of the same names,
///   [`Lease::queued_for`] a `workqueue_queue_duration_seconds` observation.
#[derive(Clone)]
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

impl<K: QueueKey> Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("WorkQueue")
            .field("len", &state.entries.len())
            .field("in_flight", &state.leased.len())
            .field("shutting_down", &state.shutting_down)
            .finish_non_exhaustive()
    }
}

impl<K: QueueKey> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new(QueueConfig::default())
    }
}

impl<K: QueueKey> WorkQueue<K> {
    /// An empty queue; the global token bucket starts full.
    #[must_use]
    pub fn new(config: QueueConfig) -> Self {
        let state = State {
            entries: HashMap::new(),
            schedule: BTreeMap::new(),
            leased: HashSet::new(),
            limiter: RateLimiter::new(config, Instant::now()),
            next_seq: 0,
            adds_total: 0,
            retries_total: 0,
            shutting_down: false,
        };
        Self { shared: Arc::new(Shared { state: Mutex::new(state), notify: Notify::new() }) }
    }

    fn enqueue(&self, key: K, ready_at: Instant) {
        if self.shared.lock().enqueue(key, ready_at) {
            self.shared.notify.notify_one();
        }
    }

    /// Enqueues `key`, ready now. Deduplicated; if `key` is leased it is handed out again
    /// right after its lease ends. Ignored after shutdown.
    pub fn add(&self, key: K) {
        self.enqueue(key, Instant::now());
    }

    /// Enqueues `key`, ready once `delay` has elapsed (requeue-after). If `key` is already
    /// waiting with an earlier ready time, that one is kept (and a later one is replaced).
    ///
    /// # Caveats
    /// Delays beyond ~30 years are clamped. Does not count as a retry (client-go counts every
    /// `AddAfter`; this queue counts only [`WorkQueue::add_rate_limited`]).
    pub fn add_after(&self, key: K, delay: Duration) {
        self.enqueue(key, Instant::now() + delay.min(MAX_DELAY));
    }

    /// Enqueues `key` after a failure: the delay is the max of its exponential backoff
    /// (`base_delay * 2^failures`, capped at `max_delay`) and the global token bucket's, as
    /// controller-runtime's `MaxOfRateLimiter`. Increments [`WorkQueue::failures`] and
    /// [`WorkQueue::retries_total`].
    ///
    /// # Caveats
    /// The failure count and a bucket token are consumed even if the add is deduplicated
    /// (as in client-go). Counters live until [`WorkQueue::forget`]: call it on success and
    /// when the object is deleted.
    pub fn add_rate_limited(&self, key: K) {
        let mut state = self.shared.lock();
        if state.shutting_down {
            return;
        }
        state.retries_total += 1;
        let delay = state.limiter.when(&key, Instant::now());
        drop(state);
        self.add_after(key, delay);
    }

    /// Resets `key`'s failure count (after a successful reconcile). Does not dequeue it.
    pub fn forget(&self, key: &K) {
        self.shared.lock().limiter.forget(key);
    }

    /// Rate-limited adds of `key` since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        self.shared.lock().limiter.failures(key)
    }

    /// Waits until a key is ready and leases it; `None` once the queue is shut down.
    ///
    /// Many workers may wait at once; each ready key wakes one of them. No busy polling: a
    /// waiter sleeps until the earliest ready time or until an earlier key arrives.
    ///
    /// # Caveats
    /// Must run inside a Tokio runtime with time enabled. Cancel-safe: dropping the future
    /// loses no key.
    pub async fn next(&self) -> Option<Lease<K>> {
        let mut waiter = WaiterGuard { shared: &self.shared, armed: true };
        loop {
            let mut notified = std::pin::pin!(self.shared.notify.notified());
            notified.as_mut().enable();
            let next_ready_at = {
                let mut state = self.shared.lock();
                if state.shutting_down {
                    waiter.armed = false;
                    return None;
                }
                let now = Instant::now();
                match state.take_ready(now) {
                    Ok((key, ready_at)) => {
                        waiter.armed = false;
                        if !state.schedule.is_empty() {
                            // We may have been the one watching the next key's ready time.
                            self.shared.notify.notify_one();
                        }
                        let queued_for = now.saturating_duration_since(ready_at);
                        return Some(Lease { shared: Arc::clone(&self.shared), key, queued_for });
                    }
                    Err(next_ready_at) => next_ready_at,
                }
            };
            match next_ready_at {
                Some(at) => {
                    let _ = tokio::time::timeout_at(at, notified).await;
                }
                None => notified.await,
            }
        }
    }

    /// Stops the queue: waiting keys are dropped, later adds are ignored, and every current
    /// and future [`WorkQueue::next`] returns `None`. Existing leases stay valid until they end.
    pub fn shutdown(&self) {
        let dropped = {
            let mut state = self.shared.lock();
            state.shutting_down = true;
            state.schedule.clear();
            std::mem::take(&mut state.entries).len()
        };
        self.shared.notify.notify_waiters();
        tracing::debug!(dropped, "work queue shut down");
    }

    /// Whether [`WorkQueue::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().shutting_down
    }

    /// Keys waiting, ready or delayed, including dirty leased ones (`workqueue_depth`).
    pub fn len(&self) -> usize {
        self.shared.lock().entries.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys currently leased.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().leased.len()
    }

    /// Adds that put a key into the queue; deduplicated adds do not count (`workqueue_adds_total`).
    pub fn adds_total(&self) -> u64 {
        self.shared.lock().adds_total
    }

    /// Calls of [`WorkQueue::add_rate_limited`] (`workqueue_retries_total`).
    pub fn retries_total(&self) -> u64 {
        self.shared.lock().retries_total
    }
}

/// Passes the baton on if a waiting `next()` is cancelled: it may have been the only waiter
/// sleeping until the earliest ready time.
struct WaiterGuard<'a, K> {
    shared: &'a Shared<K>,
    armed: bool,
}

impl<K> Drop for WaiterGuard<'_, K> {
    fn drop(&mut self) {
        if self.armed && !self.shared.lock().schedule.is_empty() {
            self.shared.notify.notify_one();
        }
    }
}

/// A key handed out by [`WorkQueue::next`]. While it lives, the key is not handed out again.
/// It ends on [`Lease::done`] or drop, so a panicking worker cannot wedge its key.
#[must_use = "dropping a lease ends it at once"]
pub struct Lease<K: QueueKey> {
    shared: Arc<Shared<K>>,
    key: K,
    queued_for: Duration,
}

impl<K: QueueKey> Lease<K> {
    /// The leased key.
    pub fn key(&self) -> &K {
        &self.key
    }

    /// How long the key was ready before it was handed out (`workqueue_queue_duration_seconds`):
    /// from its ready time (the add, or the end of an `add_after`/backoff delay) to hand-out.
    ///
    /// # Caveats
    /// For a key re-added while leased, the clock starts at that add, so this includes the
    /// wait for the previous lease to end (as client-go).
    pub fn queued_for(&self) -> Duration {
        self.queued_for
    }

    /// Ends the lease; if the key was added meanwhile it becomes ready again.
    pub fn done(self) {}
}

impl<K: QueueKey> Debug for Lease<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("key", &self.key).field("queued_for", &self.queued_for).finish_non_exhaustive()
    }
}

impl<K: QueueKey> Drop for Lease<K> {
    fn drop(&mut self) {
        if self.shared.lock().release(&self.key) {
            self.shared.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

    const MS: Duration = Duration::from_millis(1);

    async fn next_within(queue: &WorkQueue<&'static str>, wait: Duration) -> Option<Lease<&'static str>> {
        tokio::time::timeout(wait, queue.next()).await.ok().flatten()
    }

    #[tokio::test(start_paused = true)]
    async fn a_drained_queue_gives_its_tables_back() {
        let queue = WorkQueue::default();
        (0..5_000).for_each(|i| queue.add(i));
        let waiting = queue.shared.lock().entries.capacity();
        let mut leases = Vec::new();
        for _ in 0..5_000 {
            leases.push(queue.next().await.expect("queued"));
        }
        let leased = queue.shared.lock().leased.capacity();
        drop(leases);
        let state = queue.shared.lock();
        assert!(state.entries.capacity() < waiting / 8, "entries keep {} of {waiting}", state.entries.capacity());
        assert!(state.leased.capacity() < leased / 8, "leases keep {} of {leased}", state.leased.capacity());
    }

    #[tokio::test(start_paused = true)]
    async fn repeated_adds_of_a_waiting_key_queue_it_once() {
        let queue = WorkQueue::default();
        for key in ["a", "a", "b", "a"] {
            queue.add(key);
        }
        assert_eq!((queue.len(), queue.adds_total()), (2, 2));
        assert_eq!(*queue.next().await.unwrap().key(), "a");
        assert_eq!(*queue.next().await.unwrap().key(), "b");
        assert!(next_within(&queue, Duration::from_secs(60)).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_added_while_leased_is_handed_out_only_after_the_lease_ends_and_once() {
        let queue = WorkQueue::default();
        queue.add("a");
        let lease = queue.next().await.unwrap();
        queue.add("a");
        queue.add("a");
        assert_eq!((queue.len(), queue.in_flight()), (1, 1));
        assert!(next_within(&queue, Duration::from_secs(60)).await.is_none());
        let waiter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next().await.map(|lease| *lease.key()) }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        lease.done();
        assert_eq!(tokio::time::timeout(Duration::from_secs(60), waiter).await.unwrap().unwrap(), Some("a"));
        assert!(next_within(&queue, Duration::from_secs(60)).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_respects_the_delay_and_the_earliest_ready_time_wins() {
        let queue = WorkQueue::default();
        let start = Instant::now();
        queue.add_after("a", Duration::from_secs(10));
        queue.add_after("a", Duration::from_secs(3));
        queue.add_after("a", Duration::from_secs(20));
        queue.add_after("b", Duration::from_secs(1));
        queue.add("c");
        assert_eq!(queue.len(), 3);
        for (key, at) in [("c", 0), ("b", 1), ("a", 3)] {
            let lease = queue.next().await.unwrap();
            assert_eq!((*lease.key(), start.elapsed().as_secs()), (key, at));
            assert_eq!(lease.queued_for(), Duration::ZERO);
        }
        assert!(next_within(&queue, Duration::from_secs(60)).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn queued_for_counts_from_the_ready_time_not_the_add() {
        let queue = WorkQueue::default();
        queue.add_after("a", Duration::from_secs(5));
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert_eq!(queue.next().await.unwrap().queued_for(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_waits_out_the_backoff_counts_retries_and_forget_resets_it() {
        let queue = WorkQueue::default();
        let mut delays = Vec::new();
        for forget in [false, false, false, true, false] {
            let start = Instant::now();
            queue.add_rate_limited("a");
            queue.next().await.unwrap().done();
            delays.push(start.elapsed());
            if forget {
                queue.forget(&"a");
            }
        }
        assert_eq!(delays, [5, 10, 20, 40, 5].map(|ms| ms * MS));
        assert_eq!((queue.failures(&"a"), queue.retries_total(), queue.adds_total()), (1, 5, 5));
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_a_lease_releases_the_key_even_when_the_worker_panics() {
        let queue = WorkQueue::default();
        queue.add("a");
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move {
                let _lease = queue.next().await.unwrap();
                queue.add("a");
                panic!("reconcile panicked");
            }
        });
        assert!(worker.await.unwrap_err().is_panic());
        assert_eq!(queue.in_flight(), 0);
        assert_eq!(*next_within(&queue, Duration::ZERO).await.unwrap().key(), "a");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_a_waiting_next_returns_none_and_drops_waiting_keys() {
        let queue = WorkQueue::default();
        queue.add_after("late", Duration::from_secs(3600));
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.next().await.map(|lease| *lease.key()) })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(1)).await; // all three are waiting
        let start = Instant::now();
        queue.shutdown();
        for waiter in waiters {
            assert_eq!(waiter.await.unwrap(), None);
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        queue.add("a");
        assert!(queue.is_empty() && queue.is_shutting_down());
        assert!(queue.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_is_handed_out_on_time_while_the_worker_that_watched_it_is_busy() {
        let queue = WorkQueue::default();
        let start = Instant::now();
        let (sender, mut handed_out) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..2 {
            let (queue, sender) = (queue.clone(), sender.clone());
            tokio::spawn(async move {
                let lease = queue.next().await.unwrap();
                sender.send((*lease.key(), start.elapsed())).unwrap();
                tokio::time::sleep(Duration::from_secs(3600)).await; // a long reconcile
            });
        }
        drop(sender);
        tokio::task::yield_now().await;
        queue.add_after("x", Duration::from_secs(5));
        queue.add_after("y", Duration::from_secs(6));
        let mut next_handed_out = async || tokio::time::timeout(Duration::from_secs(60), handed_out.recv()).await;
        assert_eq!(next_handed_out().await, Ok(Some(("x", Duration::from_secs(5)))));
        assert_eq!(next_handed_out().await, Ok(Some(("y", Duration::from_secs(6)))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_next_passes_on_the_watch_of_the_earliest_delayed_key() {
        let queue = WorkQueue::default();
        let start = Instant::now();
        let spawn_next = |wait: Duration| {
            let queue = queue.clone();
            tokio::spawn(async move { next_within(&queue, wait).await.map(|lease| (*lease.key(), start.elapsed())) })
        };
        let cancelled = spawn_next(Duration::from_secs(1));
        tokio::task::yield_now().await;
        let idle = spawn_next(Duration::from_secs(3600));
        tokio::task::yield_now().await;
        queue.add_after("x", Duration::from_secs(5)); // wakes the longest waiter: `cancelled`
        assert_eq!(cancelled.await.unwrap(), None);
        assert_eq!(idle.await.unwrap(), Some(("x", Duration::from_secs(5))));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_workers_never_overlap_on_a_key_and_process_every_key_after_its_last_add() {
        const KEYS: usize = 20;
        const ADDS_PER_PRODUCER: usize = 50;
        let queue = WorkQueue::<usize>::new(QueueConfig::default().rate_per_second(0.0).base_delay(MS));
        let clock = Arc::new(AtomicU64::new(1)); // a global order of events
        let busy: Arc<Vec<AtomicBool>> = Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
        let last_add: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let last_start: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let (queue, clock, busy, last_start) = (queue.clone(), clock.clone(), busy.clone(), last_start.clone());
                tokio::spawn(async move {
                    while let Some(lease) = queue.next().await {
                        let key = *lease.key();
                        assert!(!busy[key].swap(true, SeqCst), "key {key} processed twice at once");
                        last_start[key].fetch_max(clock.fetch_add(1, SeqCst), SeqCst);
                        tokio::task::yield_now().await;
                        if clock.load(SeqCst) % 7 == 0 {
                            tokio::time::sleep(MS).await;
                        }
                        busy[key].store(false, SeqCst);
                        if key % 5 == 0 {
                            queue.add_rate_limited(key); // a failing reconcile
                        } else {
                            queue.forget(&key);
                        }
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..4)
            .map(|producer| {
                let (queue, clock, last_add) = (queue.clone(), clock.clone(), last_add.clone());
                tokio::spawn(async move {
                    for round in 0..ADDS_PER_PRODUCER {
                        for key in 0..KEYS {
                            // Stamp the add before making it: a worker may take the key the
                            // instant it is enqueued, and its start must then count as later.
                            last_add[key].fetch_max(clock.fetch_add(1, SeqCst), SeqCst);
                            if (key + round + producer) % 3 == 0 {
                                queue.add_after(key, MS);
                            } else {
                                queue.add(key);
                            }
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.await.unwrap();
        }
        let settle = async {
            loop {
                let settled = (0..KEYS).all(|key| last_start[key].load(SeqCst) > last_add[key].load(SeqCst));
                if settled {
                    break;
                }
                tokio::time::sleep(MS).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(20), settle).await.is_err() {
            let unsettled: Vec<_> = (0..KEYS)
                .filter(|&key| last_start[key].load(SeqCst) <= last_add[key].load(SeqCst))
                .map(|key| (key, last_add[key].load(SeqCst), last_start[key].load(SeqCst), queue.failures(&key)))
                .collect();
            panic!("keys not processed after their last add (key, add, start, failures): {unsettled:?}");
        }
        queue.shutdown();
        for worker in workers {
            worker.await.unwrap(); // a worker's overlap assertion would surface here
        }
        assert!(queue.adds_total() >= KEYS as u64);
    }
}

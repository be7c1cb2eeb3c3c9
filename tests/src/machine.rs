//! The whole machine's CPU time (`/proc/stat`): what the benches read beside their own
//! processes' time, to tell other work on a shared machine, and a hypervisor's steal, from
//! theirs.

/// The first line of `/proc/stat`, in clock ticks since boot: user, nice, system, idle,
/// iowait, irq, softirq, steal (guest time is already counted in user and nice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineTicks {
    ticks: [u64; 8],
}

impl MachineTicks {
    /// Read now; `None` where there is no `/proc/stat` or its first line is not the sum of
    /// every CPU.
    #[must_use]
    pub fn now() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// From the text of `/proc/stat`.
    fn parse(stat: &str) -> Option<Self> {
        let mut fields = stat.lines().next()?.strip_prefix("cpu ")?.split_whitespace();
        let mut ticks = [0; 8];
        for tick in &mut ticks {
            *tick = fields.next()?.parse().ok()?;
        }
        Some(Self { ticks })
    }

    /// All of it: busy, idle and stolen.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.ticks.iter().sum()
    }

    /// Time some CPU had work: all but idle and iowait (steal included).
    #[must_use]
    pub fn busy(&self) -> u64 {
        self.total() - self.ticks[3] - self.ticks[4]
    }

    /// Time the hypervisor ran other guests while this machine had work.
    #[must_use]
    pub fn steal(&self) -> u64 {
        self.ticks[7]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_gives_busy_idle_and_stolen_time() {
        let stat = "cpu  100 5 30 800 20 1 4 40 0 0\ncpu0 50 2 15 400 10 0 2 20 0 0\n";
        let ticks = MachineTicks::parse(stat).unwrap();
        assert_eq!((ticks.total(), ticks.busy(), ticks.steal()), (1000, 180, 40));
        assert_eq!(MachineTicks::parse("cpu0 1 2 3\n"), None);
        assert_eq!(MachineTicks::parse("cpu  1 2 3\n"), None);
    }
}

//! Process figures from `/proc/self/stat` (RSS, virtual size, CPU user and
//! system time). Read on the scraping shard: procfs reads are answered from
//! kernel memory and never wait on a disk, so they do not stall the shard.

/// What `/proc/self/stat` says about this process.
#[derive(Debug, Default, Clone, Copy)]
pub struct Process {
    /// Resident set size, bytes.
    pub rss: u64,
    /// Virtual memory size, bytes.
    pub vm: u64,
    /// CPU time in user mode, µs.
    pub cpu_user_us: u64,
    /// CPU time in kernel mode, µs.
    pub cpu_system_us: u64,
}

/// Reads the figures; all zero when procfs is not there (not Linux, no /proc).
pub fn read() -> Process {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse(&s))
        .unwrap_or_default()
}

/// Parses a `/proc/<pid>/stat` line.
fn parse(stat: &str) -> Option<Process> {
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    // SAFETY: sysconf has no preconditions; it only reads system constants.
    let (tick, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let tick = if tick > 0 { tick as u64 } else { 100 };
    let page = if page > 0 { page as u64 } else { 4096 };
    Some(Process {
        cpu_user_us: num(14)? * 1_000_000 / tick,
        cpu_system_us: num(15)? * 1_000_000 / tick,
        vm: num(23)?,
        rss: num(24)? * page,
    })
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_a_stat_line_with_spaces_in_the_name() {
        let line = "42 (shard 0) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 \
                    100 123456789 2048 18446744073709551615";
        let p = parse(line).expect("parses");
        assert_eq!(p.vm, 123_456_789);
        assert!(p.rss >= 2048 * 4096);
        assert!(p.cpu_user_us > p.cpu_system_us);
    }
}

//! The command line: every command and flag, as clap derive types. `completions`
//! generates shell completions from this same definition, so they never drift.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The broker's default address (the spec's default port 6632).
pub const DEFAULT_URL: &str = "http://localhost:6632";

/// The Queen broker from a terminal.
#[derive(Debug, Parser)]
#[command(name = "queenctl", version, about, propagate_version = true)]
pub struct Cli {
    /// Broker base URL.
    #[arg(long, global = true, env = "QUEEN_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// Bearer token (JWT) sent as `Authorization: Bearer <token>`.
    #[arg(long, global = true, env = "QUEEN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Machine output: one JSON document, or one JSON object per line for message streams.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Push one JSON payload, or one per line of stdin (100 per request).
    Push(PushArgs),
    /// Pop a batch of messages once.
    Pop(PopArgs),
    /// Print messages as they arrive, acking each after printing, until --count or Ctrl-C.
    Tail(TailArgs),
    /// Every queue with its partitions and message counts.
    Queues,
    /// One queue: its configuration and the depth of each partition.
    Queue {
        /// Queue name.
        name: String,
    },
    /// Create a queue or change its options (unset options keep their value).
    Configure(ConfigureArgs),
    /// Delete a queue with its partitions, messages, cursors and DLQ rows.
    Delete {
        /// Queue name.
        queue: String,
        /// Confirm: without it nothing is deleted.
        #[arg(long)]
        yes: bool,
    },
    /// Every consumer group on every queue.
    Groups,
    /// One consumer group: its cursor and lag on each partition.
    Group {
        /// Group name.
        name: String,
    },
    /// Move a group's cursor on every partition of a queue.
    Seek(SeekArgs),
    /// Dead letters of a queue, or `dlq retry ID` to replay one.
    Dlq(DlqArgs),
    /// Messages of a queue by status (the broker's window: the last hour by default).
    Messages(MessagesArgs),
    /// One message, with its payload and per-group state.
    Message {
        /// Partition id (UUID).
        partition_id: String,
        /// Transaction id.
        transaction_id: String,
    },
    /// Push maintenance (pushes are spooled) and pop maintenance (pops deliver nothing).
    Maintenance {
        /// What to show or flip.
        #[command(subcommand)]
        action: MaintenanceAction,
    },
    /// Timers: schedule a message for later, list, peek, count, cancel.
    Timers {
        /// What to do.
        #[command(subcommand)]
        action: TimersAction,
    },
    /// The key/value store: get, put, incr, delete, list keys, namespaces.
    Kv {
        /// What to do.
        #[command(subcommand)]
        action: KvAction,
    },
    /// Load scenarios of bench/ (push, drain, latency) with a progress bar and its summary.
    Bench(BenchArgs),
    /// Print shell completions to stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Queue name (created on first push).
    pub queue: String,
    /// The payload, as JSON (`'{"id": 1}'`, `42`, `'"text"'`).
    #[arg(required_unless_present = "stdin", conflicts_with = "stdin")]
    pub payload: Option<String>,
    /// Partition name (the broker's default is `Default`).
    #[arg(long)]
    pub partition: Option<String>,
    /// Read one JSON payload per line from stdin; blank lines are skipped.
    #[arg(long)]
    pub stdin: bool,
    /// Transaction id (the broker mints one when absent); a repeat is a duplicate.
    #[arg(long, conflicts_with = "stdin")]
    pub txid: Option<String>,
}

/// `pop`.
#[derive(Debug, Args)]
pub struct PopArgs {
    /// Queue name.
    pub queue: String,
    /// Most messages to take.
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Consumer group (default: queue mode).
    #[arg(long)]
    pub group: Option<String>,
    /// Acknowledge on delivery (autoAck): nothing stays leased.
    #[arg(long)]
    pub ack: bool,
    /// Long-poll up to this many seconds for a message.
    #[arg(long)]
    pub wait: Option<f64>,
    /// Only this partition.
    #[arg(long)]
    pub partition: Option<String>,
}

/// `tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// Queue name.
    pub queue: String,
    /// Consumer group (default: queue mode).
    #[arg(long)]
    pub group: Option<String>,
    /// Stop after this many messages.
    #[arg(long)]
    pub count: Option<u64>,
}

/// `configure`: the queue options of the spec's `POST /api/v1/configure`.
#[derive(Debug, Args)]
pub struct ConfigureArgs {
    /// Queue name.
    pub queue: String,
    /// Lease length of a pop, seconds.
    #[arg(long)]
    pub lease_time: Option<u64>,
    /// Failed attempts before the DLQ.
    #[arg(long)]
    pub retry_limit: Option<u64>,
    /// Delay before a failed batch is redelivered, milliseconds.
    #[arg(long)]
    pub retry_delay: Option<u64>,
    /// Queue priority.
    #[arg(long)]
    pub priority: Option<i64>,
    /// Messages stay invisible until this old, seconds.
    #[arg(long)]
    pub delayed_processing: Option<u64>,
    /// A partition is held back until its newest message is this old, seconds.
    #[arg(long)]
    pub window_buffer: Option<u64>,
    /// Delete any message older than this, seconds (turns retention on; 0 turns it off).
    #[arg(long)]
    pub retention_seconds: Option<u64>,
    /// Delete consumed messages older than this, seconds.
    #[arg(long)]
    pub completed_retention_seconds: Option<u64>,
    /// Evict unconsumed messages older than this, seconds.
    #[arg(long)]
    pub max_wait_time_seconds: Option<u64>,
    /// Encrypt payloads at rest (the broker needs its key).
    #[arg(long)]
    pub encryption: Option<bool>,
    /// Namespace of the queue.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Task of the queue.
    #[arg(long)]
    pub task: Option<String>,
}

/// `seek`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to_end", "timestamp"])))]
pub struct SeekArgs {
    /// Consumer group.
    pub group: String,
    /// Queue name.
    pub queue: String,
    /// To the newest message: everything now in the queue counts as consumed.
    #[arg(long)]
    pub to_end: bool,
    /// To the last message created at or before this ISO-8601 time.
    #[arg(long)]
    pub timestamp: Option<String>,
}

/// `dlq`: list a queue's dead letters, or replay one.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct DlqArgs {
    /// Replay instead of listing.
    #[command(subcommand)]
    pub action: Option<DlqAction>,
    /// Queue name.
    #[arg(required = true)]
    pub queue: Option<String>,
    /// Only this consumer group's dead letters.
    #[arg(long)]
    pub group: Option<String>,
    /// Most rows to list.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
}

/// `dlq retry`.
#[derive(Debug, Subcommand)]
pub enum DlqAction {
    /// Push a dead letter's payload again (as `dlq:<id>`) and remove its DLQ row.
    Retry {
        /// The DLQ row id (the ID column of `queenctl dlq QUEUE`).
        id: String,
    },
}

/// `messages`.
#[derive(Debug, Args)]
pub struct MessagesArgs {
    /// Queue name.
    pub queue: String,
    /// Only messages in this state.
    #[arg(long, value_enum)]
    pub status: Option<Status>,
    /// Only this partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// Window start, ISO-8601 (broker default: an hour ago).
    #[arg(long)]
    pub from: Option<String>,
    /// Window end, ISO-8601 (broker default: now).
    #[arg(long)]
    pub to: Option<String>,
    /// Most rows to list.
    #[arg(long, default_value_t = 200)]
    pub limit: u32,
}

/// A message state as `GET /api/v1/messages` filters it.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Status {
    /// Not yet consumed.
    Pending,
    /// Inside a live lease.
    Processing,
    /// At or before the cursor.
    Completed,
    /// In the DLQ.
    #[value(name = "dead_letter", alias = "dlq")]
    DeadLetter,
}

impl Status {
    /// The wire value.
    pub fn wire(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Processing => "processing",
            Status::Completed => "completed",
            Status::DeadLetter => "dead_letter",
        }
    }
}

/// `maintenance`.
#[derive(Debug, Subcommand)]
pub enum MaintenanceAction {
    /// Both switches and the spool.
    Status,
    /// Push maintenance on: pushes are spooled, not written to PostgreSQL.
    On,
    /// Push maintenance off: the spool replays.
    Off,
    /// Pop maintenance: show it, or turn it on or off.
    Pop {
        /// `on` or `off`; absent shows the switch.
        state: Option<OnOff>,
    },
}

/// `kv`.
#[derive(Debug, Subcommand)]
pub enum KvAction {
    /// One key's value, version and expiry.
    Get {
        /// Namespace (`[a-z0-9][a-z0-9._-]*`).
        ns: String,
        /// Key.
        key: String,
    },
    /// Write a key (an expiry is required: `--ttl` or `--forever`).
    Put {
        /// Namespace.
        ns: String,
        /// Key.
        key: String,
        /// The value, as JSON (`'{"a": 1}'`, `42`, `'"text"'`).
        value: String,
        #[command(flatten)]
        expiry: KvExpiry,
        /// Only if the key's version is this (0: only if the key does not exist).
        #[arg(long)]
        expect: Option<u64>,
    },
    /// Add to an integer key (created at 0 with the given expiry).
    Incr {
        /// Namespace.
        ns: String,
        /// Key.
        key: String,
        /// How much to add (may be negative).
        #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
        delta: i64,
        #[command(flatten)]
        expiry: KvExpiry,
    },
    /// Delete a key.
    Delete {
        /// Namespace.
        ns: String,
        /// Key.
        key: String,
        /// Only if the key's version is this.
        #[arg(long)]
        expect: Option<u64>,
    },
    /// Keys of a namespace (with `--prefix`: those starting with it), in byte order.
    List {
        /// Namespace.
        ns: String,
        /// Only keys starting with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Start after this key (the previous page's last).
        #[arg(long)]
        after: Option<String>,
        /// Most keys to list.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Namespaces with their key counts.
    Namespaces,
}

/// The expiry of a KV write: exactly one of the two.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct KvExpiry {
    /// Seconds to live.
    #[arg(long)]
    pub ttl: Option<u64>,
    /// Never expires.
    #[arg(long)]
    pub forever: bool,
}

/// A switch position.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// `bench`: what every scenario shares. Defaults are `queen-bench`'s.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The scenario.
    #[command(subcommand)]
    pub scenario: BenchScenario,
    /// Free text copied into the report.
    #[arg(long, global = true)]
    pub label: Option<String>,
    /// Prefix of the fresh queue each run makes.
    #[arg(long, global = true, default_value = "bench")]
    pub queue_prefix: String,
    /// Consumer group for pops and acks (default: queue mode).
    #[arg(long, global = true)]
    pub group: Option<String>,
}

/// The scenarios.
#[derive(Debug, Subcommand)]
pub enum BenchScenario {
    /// Closed-loop (or --rate) push throughput.
    Push(BenchPush),
    /// Prefill a queue, then pop and ack it empty.
    Drain(BenchDrain),
    /// Push at a fixed rate and measure push-to-pop latency.
    Latency(BenchLatency),
}

/// `bench push`.
#[derive(Debug, Args)]
pub struct BenchPush {
    /// Items per request.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Concurrent connections.
    #[arg(long, default_value_t = 50)]
    pub conns: usize,
    /// Partitions to rotate over.
    #[arg(long, default_value_t = 1)]
    pub partitions: usize,
    /// Measured window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Untimed lead-in, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Approximate payload size, bytes.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Offer this many msg/s in total (open loop) instead of closed loop.
    #[arg(long)]
    pub rate: Option<f64>,
}

/// `bench drain`.
#[derive(Debug, Args)]
pub struct BenchDrain {
    /// Messages pushed before the drain.
    #[arg(long, default_value_t = 100_000)]
    pub prefill: u64,
    /// Partitions of the prefill.
    #[arg(long, default_value_t = 100)]
    pub partitions: usize,
    /// Connections pushing the prefill.
    #[arg(long, default_value_t = 20)]
    pub prefill_conns: usize,
    /// Messages per pop.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Concurrent consumers.
    #[arg(long, default_value_t = 10)]
    pub conns: usize,
    /// Pop with autoAck instead of acking each batch.
    #[arg(long)]
    pub auto_ack: bool,
    /// Long-poll budget of a pop, ms.
    #[arg(long, default_value_t = 1000)]
    pub wait_ms: u64,
    /// Stop after this long without a delivery, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub idle_secs: f64,
    /// Stop after this long in any case, seconds.
    #[arg(long, default_value_t = 120.0)]
    pub max_secs: f64,
    /// Messages consumed before the window opens (default batch × conns × 2).
    #[arg(long)]
    pub warmup_msgs: Option<u64>,
    /// Approximate payload size, bytes.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
}

/// `bench latency`.
#[derive(Debug, Args)]
pub struct BenchLatency {
    /// Messages per second offered in total.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Items per push.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Producer connections.
    #[arg(long, default_value_t = 64)]
    pub producers: usize,
    /// Consumer connections.
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Partitions to spread over.
    #[arg(long, default_value_t = 10)]
    pub partitions: usize,
    /// Measured window, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Untimed lead-in, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Pop with autoAck.
    #[arg(long)]
    pub auto_ack: bool,
    /// Messages per pop.
    #[arg(long, default_value_t = 100)]
    pub pop_batch: usize,
    /// Long-poll budget of a pop, ms.
    #[arg(long, default_value_t = 1000)]
    pub wait_ms: u64,
    /// How long consumers keep reading after the producers stop, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub grace_secs: f64,
    /// Approximate payload size, bytes.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
}

/// `timers` (http-api.md §16).
#[derive(Debug, Subcommand)]
pub enum TimersAction {
    /// Schedule (or replace) the timer KEY of QUEUE: PAYLOAD becomes a message after the delay.
    Schedule {
        /// Destination queue.
        queue: String,
        /// The timer's key (may hold `/`).
        key: String,
        /// The payload, as JSON.
        payload: String,
        /// Delay from now, milliseconds (0 or less: fire at once).
        #[arg(long, allow_negative_numbers = true)]
        delay_ms: i64,
        /// Destination partition (the broker's default is `Default`).
        #[arg(long)]
        partition: Option<String>,
        /// Transaction id of the future message (default: a fresh one).
        #[arg(long)]
        txn: Option<String>,
    },
    /// Pending timers of a queue, by key.
    List {
        /// Queue name.
        queue: String,
        /// Start after this key (exclusive).
        #[arg(long)]
        after: Option<String>,
        /// Most rows (the broker clamps to 1..1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// One timer as stored.
    Show {
        /// Queue name.
        queue: String,
        /// The timer's key.
        key: String,
    },
    /// How many timers a queue holds, optionally under a key prefix.
    Count {
        /// Queue name.
        queue: String,
        /// Only keys starting with this.
        #[arg(long)]
        prefix: Option<String>,
    },
    /// Pending timers per queue.
    Pending,
    /// Cancel a timer (`absent` may mean it already fired).
    Cancel {
        /// Queue name.
        queue: String,
        /// The timer's key.
        key: String,
        /// The txn it was scheduled with (echoed back on `absent`).
        #[arg(long)]
        txn: Option<String>,
    },
}

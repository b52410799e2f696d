//! Command-line arguments (clap). `ah [OPTIONS] [PROMPT]...` runs a task;
//! subcommands manage runs and the sandbox.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::parser::ValueSource;
use clap::{ArgMatches, Parser, Subcommand};

use super::colour::ColorWhen;
use super::sessions::SessionCommand;
use ah_core::run::{
    AttemptOptions, BackendKind, NetworkMode, OnCommandLine, OutputLimit, OutputLimits, ReviewMode,
    RunOptions, SandboxOptions, SessionChoice, UlimitKind, parse_size,
};

/// ah — a coding agent that works on a sandboxed copy of your project and
/// changes your repository only through a patch you have seen.
#[derive(Debug, Parser)]
#[command(name = "ah", version, about, long_about = None)]
#[command(args_conflicts_with_subcommands = true)]
#[command(
    after_help = "Options may come before or after a command: `ah -C ~/repo tree` is \
    `ah tree -C ~/repo`. A task whose first word is a command's name goes after `--`: \
    `ah -- tree`, `ah -C ~/repo -- show me the tree`."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The task for the agent (after `--` when its first word is a
    /// command's name: `ah -- tree`).
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,

    /// The project to work on (default: the current directory).
    #[arg(short = 'C', long = "project", value_name = "DIR", global = true)]
    pub project: Option<PathBuf>,

    /// Set a configuration key for this command, over the config files and
    /// AH_* variables, e.g. `-c sandbox.memory=8g` (repeatable; `ah config`
    /// lists the keys).
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE", global = true)]
    pub overrides: Vec<String>,

    /// Colour the output: auto (only a terminal, and not when NO_COLOR is
    /// set), always (also into a pipe or a pager), never.
    #[arg(
        long = "color",
        value_name = "WHEN",
        value_enum,
        global = true,
        default_value_t
    )]
    pub color: ColorWhen,

    /// Where the tools run: a rootless podman container, one on a remote podman
    /// engine, or unsandboxed on a copy (`--backend` is the same option).
    #[arg(long = "engine", visible_alias = "backend", value_name = "ENGINE",
          value_parser = backend_parser(), default_value = "podman")]
    pub backend: BackendKind,

    /// The remote engine for `--engine podman-remote`: a connection of `podman system
    /// connection` (default: CONTAINER_HOST, else podman's default connection).
    #[arg(long, value_name = "NAME")]
    pub connection: Option<String>,

    /// The sandbox image (podman backend).
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    #[command(flatten)]
    pub sandbox: SandboxArgs,

    /// What to do with the patch: ask (terminal default), auto (apply only small,
    /// clean, unrestricted patches), never (save only; default without a terminal).
    #[arg(long, value_parser = review_parser())]
    pub review: Option<ReviewMode>,

    /// Load a skill (`.ah/skills/NAME/SKILL.md` or the global skills folder)
    /// into the conversation before the prompt (repeatable).
    #[arg(long = "skill", value_name = "NAME")]
    pub skills: Vec<String>,

    // `[models]` is the config's table, shown as written in --help; rustdoc
    // would take it for a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Model alias (opus, sonnet, haiku, or one from the config's [models]),
    /// full Claude model id, or PROVIDER:MODEL (openai, ollama, lmstudio, vllm,
    /// openrouter or a [providers.NAME] of the config; e.g.
    /// ollama:qwen2.5-coder:7b); may differ from the session's earlier runs
    /// [config: model; env: AH_MODEL; default: opus].
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    pub model: Option<String>,

    /// Start a new session instead of continuing the most recent one (with
    /// --name NAME: a new session named NAME).
    #[arg(short = 'n', long = "new")]
    pub new_session: bool,

    #[command(flatten)]
    pub session: SessionArgs,

    /// Send MSG to the ah working on this session (from another terminal):
    /// the model gets it at the next tool round, and the tool calls of the
    /// turn not yet run are skipped.
    #[arg(long, value_name = "MSG", conflicts_with_all = ["prompt", "followup", "new_session", "wait"])]
    pub steer: Option<String>,

    /// Queue MSG for the ah working on this session: it starts another turn
    /// when the current one ends.
    #[arg(long, value_name = "MSG", conflicts_with_all = ["prompt", "new_session"])]
    pub followup: Option<String>,

    /// When the prompt (or --followup) is queued for another ah working on
    /// the session: wait until its turn is answered, and print the answer.
    #[arg(long, conflicts_with = "json")]
    pub wait: bool,

    /// Start from the project's current files even when the conversation was
    /// forked or checked out at an earlier point (whose files are otherwise
    /// restored).
    #[arg(long)]
    pub no_restore: bool,

    /// Print the run's events as JSON lines on stdout (and nothing else on
    /// stdout); human messages stay on stderr. Implies --review never unless
    /// --review auto is given.
    #[arg(long)]
    pub json: bool,

    /// Stop after this many tool calls.
    #[arg(long, value_name = "N")]
    pub max_tools: Option<u32>,

    /// Seconds a bash call may run when the model names no timeout (at most
    /// 600) [config: tools.bash_timeout; default: 120].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=600))]
    pub bash_timeout: Option<u64>,

    /// Loop detection: when the last N tool calls repeat one pattern of 1 to 3
    /// calls, tell the model to change approach; the third time, stop the run.
    /// 0 turns it off.
    #[arg(long, value_name = "N", default_value_t = ah_core::agent::loop_detect::DEFAULT_WINDOW)]
    pub loop_window: usize,

    /// Summarise the conversation when it comes within N tokens of the model's
    /// context window.
    #[arg(long, value_name = "N", default_value_t = ah_core::agent::compact::DEFAULT_RESERVE)]
    pub compact_reserve: u64,

    /// Apply the patch without committing it on the host.
    #[arg(long)]
    pub no_commit: bool,

    /// A write policy file (overrides .ah/policy.toml keys it sets).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,

    /// Also allow writes matching this glob (repeatable).
    #[arg(long = "allow", value_name = "GLOB")]
    pub allow: Vec<String>,

    /// Also deny writes matching this glob (repeatable).
    #[arg(long = "deny", value_name = "GLOB")]
    pub deny: Vec<String>,

    /// How much of a tool's output the model gets, `TOOL=CHARS` for read,
    /// bash, edit, write, or `bash-lines=N` (repeatable; defaults read=50000,
    /// bash=30000, bash-lines=256, edit=10000, write=1000; at least 200
    /// characters, 10 lines). The whole output is always kept in the step
    /// files and the session.
    #[arg(long = "output-limit", value_name = "TOOL=N", value_parser = parse_output_limit)]
    pub output_limits: Vec<(OutputLimit, usize)>,

    /// Files the run added that are larger than this (MiB) are not copied out
    /// as artifacts.
    #[arg(long, value_name = "MIB", default_value_t = 10)]
    pub max_artifact_size: u64,

    /// Run N attempts of the task side by side, each a run of its own from
    /// the same files, and review the best one (see --check).
    #[arg(short = 'N', long = "attempts", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub attempts: Option<u32>,

    /// With -N: run COMMAND in each attempt's sandbox once its agent is done;
    /// exit code 0 passes (what it changes is undone). Without it every
    /// attempt that finished passes.
    #[arg(long, value_name = "COMMAND", requires = "attempts")]
    pub check: Option<String>,

    /// With -N: seconds the check may take (at most 600).
    #[arg(long, value_name = "SECS", default_value_t = 600, requires = "check",
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub check_timeout: u64,

    /// With -N: at most J attempts work at once; with `ah batch`, J tasks
    /// (default: the number of cores).
    #[arg(short = 'j', long = "jobs", value_name = "J",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: Option<u32>,

    /// With -N: stop the other attempts as soon as one passes its check.
    #[arg(long, requires = "check")]
    pub first: bool,
}

impl RunArgs {
    /// What `-N` asks for, when it asks for more than one attempt.
    pub(crate) fn attempts(&self) -> Option<AttemptOptions> {
        let count = self.attempts.filter(|n| *n > 1)? as usize;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Some(AttemptOptions {
            count,
            jobs: self.jobs.map_or(cores, |j| j as usize),
            check: self.check.clone(),
            check_timeout: self.check_timeout,
            first: self.first,
        })
    }
}

/// How the podman sandbox is started. The defaults work on hosts like the
/// design's (cgroup v1 hybrid, runc); limits are clamped to the host's.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SandboxArgs {
    /// The OCI runtime podman uses (`runc`, `crun`, or a path); default: runc
    /// when installed, since crun fails on cgroup v1/hybrid hosts.
    #[arg(long, value_name = "RUNTIME", global = true)]
    pub runtime: Option<String>,

    /// Memory limit of the sandbox, as podman takes it (e.g. 4g).
    #[arg(long, value_name = "SIZE", default_value = "4g")]
    pub memory: String,

    /// Disk the run directory (work copy, shadow repo, step files, and at the
    /// end the patch and artifacts) may take (e.g. 10G); the run stops when it
    /// passes this or when less than 1 GiB stays free [config:
    /// sandbox.disk_budget; default: 10G].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub disk_budget: Option<u64>,

    /// Most processes the sandbox may run at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub pids_limit: u32,

    /// Refuse to run when a limit asked for (memory, pids) cannot be
    /// enforced by a cgroup here, rather than run with a weaker stand-in
    /// (rootless podman on cgroup v1, `--backend none`) [config:
    /// sandbox.strict_limits].
    #[arg(long)]
    pub strict_limits: bool,

    /// A resource limit inside the sandbox, `nofile=N` or `nproc=N`
    /// (repeatable); lowered to the caller's hard limits when higher.
    #[arg(long = "ulimit", value_name = "KIND=N", value_parser = parse_ulimit)]
    pub ulimits: Vec<(UlimitKind, u64)>,

    /// The sandbox's network: none (default: no network at all), proxy (only
    /// tunnels to allowed HOST:PORT targets, through a proxy on the host),
    /// full (any outbound connection; warned about on every run).
    #[arg(long, value_parser = network_parser(), value_name = "MODE")]
    pub network: Option<NetworkMode>,

    /// Let the proxy reach HOST:PORT (repeatable; `*.example.org:443` matches
    /// names under example.org; no port wildcard); adds to `[network] allow`.
    #[arg(long = "allow-host", value_name = "HOST:PORT")]
    pub allow_hosts: Vec<String>,

    /// Pass the host variable NAME into the sandbox (repeatable); adds to
    /// `[sandbox] env`. Names of secrets (`*_API_KEY`, `*_TOKEN`, …) never are.
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
}

/// Which output cap `--output-limit` sets.
fn parse_output_limit(text: &str) -> Result<(OutputLimit, usize), String> {
    let (tool, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected TOOL=N, e.g. bash=50000"))?;
    let limit = match tool {
        "read" => OutputLimit::Read,
        "bash" => OutputLimit::Bash,
        "bash-lines" => OutputLimit::BashLines,
        "edit" => OutputLimit::Edit,
        "write" => OutputLimit::Write,
        other => {
            return Err(format!(
                "unknown output limit {other:?}: use read, bash, bash-lines, edit or write"
            ));
        }
    };
    let value: usize = value
        .parse()
        .map_err(|_| format!("{value:?} is not a whole number"))?;
    // Below these the cut marker would leave the model little or nothing of
    // the output itself.
    let (minimum, unit) = match limit {
        OutputLimit::BashLines => (OutputLimits::MIN_LINES, "lines"),
        _ => (OutputLimits::MIN_CHARS, "characters"),
    };
    if value < minimum {
        return Err(format!(
            "{tool}={value} is too small: the marker that says what was cut needs room, \
             so {tool} must be at least {minimum} {unit}"
        ));
    }
    Ok((limit, value))
}

fn parse_ulimit(text: &str) -> Result<(UlimitKind, u64), String> {
    let (kind, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected nofile=N or nproc=N"))?;
    let kind = match kind {
        "nofile" => UlimitKind::Nofile,
        "nproc" => UlimitKind::Nproc,
        other => return Err(format!("unknown limit {other:?}: ah sets nofile and nproc")),
    };
    let value = value
        .parse()
        .map_err(|_| format!("{value:?} is not a whole number"))?;
    Ok((kind, value))
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Apply a saved run's patch to the project (3-way), and commit it.
    Apply {
        /// The run id (a prefix is enough when unambiguous).
        run_id: String,
        /// Apply without committing.
        #[arg(long)]
        no_commit: bool,
        /// Apply even if the run's manifest says it was applied already.
        #[arg(long)]
        force: bool,
    },
    /// Run the tasks of a JSON-lines file, at most -j at once, each in a new
    /// session of its project; results appended to RESULTS as each ends.
    /// The same command again skips the tasks that have a result.
    #[command(mut_arg("prompt", |arg| arg
        .value_name("TASKS")
        .help("One task a line: {\"id\", \"project\", \"prompt\" | \"issue\", \"model\"?, \"check\"?, \"attempts\"?, \"review\": \"never\" | \"auto\"}")
        .num_args(1)
        .required(true)))]
    Batch {
        /// Where the results go (default: TASKS with .results.jsonl).
        #[arg(long, value_name = "RESULTS")]
        out: Option<PathBuf>,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Review a saved run's patch again (default: the newest run whose patch
    /// was not applied): apply all or some of it, save, discard, or revise
    /// (a new run of its session that goes on from its files, with the
    /// run options given here).
    #[command(mut_arg("prompt", |arg| arg
        .value_name("RUN")
        .help("The run id (a prefix is enough when unambiguous)")
        .num_args(0..=1)))]
    Review {
        #[command(flatten)]
        run: RunArgs,
    },
    /// Work on an issue in phases, in one run: plan (read-only), do, check
    /// (read-only, runs the plan's validation commands) and act (done, fix
    /// → another do round, or friction → stop), then review the patch.
    #[command(mut_arg("prompt", |arg| arg
        .value_name("ISSUE_FILE")
        .help("A file holding the issue (or give it with --issue)")
        .num_args(0..=1)))]
    Work {
        /// The issue as text instead of a file.
        #[arg(long, value_name = "TEXT")]
        issue: Option<String>,
        /// Most do rounds: the first and the fixes after failed checks
        /// [config: work.max_rounds; default: 3].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_rounds: Option<u32>,
        #[command(flatten)]
        run: Box<RunArgs>,
    },
    /// Several agents on one task, in one run: each a model with a role,
    /// they work in turns and address each other (`@@name`, `@@group`) or
    /// you (`@@user`); the result is one patch to review. `-S SESSION
    /// "words"` continues an org (an answer goes to the agent that asked).
    #[command(mut_arg("prompt", |arg| arg
        .value_name("TASK")
        .help("The task (or, with -S, what to tell the org: an answer goes to the agent that asked)")))]
    Org {
        /// The agents, in turn order: `name:model` pairs or names defined in
        /// .ah/agents/NAME.md (default: every defined agent).
        #[arg(long, value_name = "LIST")]
        agents: Option<String>,
        /// Most ticks (agent turns) of the run [default: 100].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_ticks: Option<u32>,
        /// Stop after this many ticks in a row without a tool call or a file
        /// change [default: 6].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        idle_ticks: Option<u32>,
        #[command(flatten)]
        run: Box<RunArgs>,
    },
    /// List the project's runs, newest first.
    Runs {
        #[command(subcommand)]
        action: Option<RunsAction>,
    },
    /// Write one self-contained HTML page on runs, to open in a browser: a
    /// sortable table of the runs (or of a batch's tasks), and for each run
    /// a timeline of its turns, its check's output and its coloured patch
    /// (default: the project's 50 newest runs).
    Report {
        /// The runs (ids; a prefix is enough when unambiguous).
        #[arg(value_name = "RUN", conflicts_with = "batch")]
        runs: Vec<String>,
        /// The tasks of this `ah batch` results file, and the runs they name.
        #[arg(long, value_name = "RESULTS")]
        batch: Option<PathBuf>,
        /// Where the page goes.
        #[arg(short = 'o', long = "out", value_name = "FILE")]
        out: PathBuf,
    },
    /// Print the merged configuration: every key, its value, and where the
    /// value came from (default, a config file, an AH_* variable, or -c).
    Config,
    /// Summarise the session's conversation now: later requests carry the
    /// summary and the most recent messages (the session keeps everything).
    Compact {
        /// The model that writes the summary (default: the session's model).
        #[arg(short = 'm', long = "model", value_name = "MODEL")]
        model: Option<String>,
    },
    #[command(flatten)]
    Session(SessionCommand),
    /// Check that the sandbox can run here (or on a remote engine), and say
    /// how to fix what cannot.
    Doctor {
        /// The sandbox image to check.
        #[arg(long, value_name = "IMAGE")]
        image: Option<String>,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Print a shell completion script (e.g. `ah completions bash >
    /// ~/.local/share/bash-completion/completions/ah`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Manage the sandbox image.
    Image {
        #[command(subcommand)]
        action: ImageAction,
    },
    /// Write a run's sandbox as Kubernetes objects (talks to no cluster).
    Kube {
        #[command(subcommand)]
        action: KubeAction,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum KubeAction {
    /// Print a Pod and a NetworkPolicy for a saved run (YAML, two
    /// documents), from what its manifest recorded: its image, limits and
    /// network. For `kubectl apply -f -` or `podman kube play -`.
    Manifest {
        /// The run id (a prefix is enough when unambiguous; `ah runs` lists them).
        #[arg(value_name = "RUN")]
        run_id: String,
        /// The image the Pod's init container copies the init and the agent
        /// from (/usr/lib/ah/init and /usr/lib/ah/agent)
        /// [default: localhost/ah-runtime:latest].
        #[arg(long, value_name = "IMAGE")]
        runtime_image: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsAction {
    /// Remove old run directories (patch, steps, shadow repo), never a live
    /// run. A forked conversation cannot restore the files of a pruned run.
    Prune {
        /// Remove only runs started longer ago than this (e.g. 14d, 12h, 30m, 2w).
        #[arg(long, value_name = "AGE", default_value = super::prune::DEFAULT_AGE,
              value_parser = super::prune::parse_age)]
        older_than: std::time::Duration,
        /// Keep the newest N runs whatever their age.
        #[arg(long, value_name = "N", default_value_t = 0)]
        keep: usize,
        /// Show what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ImageAction {
    /// Build the sandbox image (podman build, or offline from a Debian rootfs).
    Build {
        /// The image name to build.
        #[arg(long, value_name = "IMAGE")]
        image: Option<String>,
        /// Build from a Debian rootfs without a container registry (debootstrap as
        /// root, mmdebstrap without root).
        #[arg(long, conflicts_with = "registry")]
        offline: bool,
        /// Build with `podman build` from the registry's base image.
        #[arg(long)]
        registry: bool,
        /// Build IMAGE from this Containerfile instead (a project's own, say
        /// `FROM localhost/ah-sandbox:latest` and its toolchain) with podman
        /// build, the file's folder as the context.
        #[arg(long, short = 'f', value_name = "CONTAINERFILE", requires = "image",
              conflicts_with_all = ["offline", "registry"])]
        file: Option<PathBuf>,
        /// Build only when the image is missing or was built by another ah
        /// (its recipe label differs from this ah's package list).
        #[arg(long, conflicts_with = "file")]
        if_stale: bool,
        /// With `--engine podman-remote`: the image is built here, then
        /// loaded into the remote engine.
        #[command(flatten)]
        engine: EngineArgs,
    },
}

/// Which engine a command besides a run is about.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct EngineArgs {
    /// `podman` (this machine's, the default) or `podman-remote`.
    #[arg(long = "engine", value_name = "ENGINE", value_parser = backend_parser())]
    pub engine: Option<BackendKind>,
    /// The remote engine's connection (`podman system connection`; default:
    /// CONTAINER_HOST, else podman's default connection).
    #[arg(long, value_name = "NAME")]
    pub connection: Option<String>,
}

impl EngineArgs {
    /// `options` with the engine and connection these name.
    pub(crate) fn apply(&self, options: &mut RunOptions) {
        if let Some(engine) = self.engine {
            options.backend = engine;
        }
        if let Some(connection) = &self.connection {
            options.sandbox.connection = Some(connection.clone());
        }
    }
}

/// The flags that choose a session; global, so every subcommand takes them.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct SessionArgs {
    /// Use this session database file.
    #[arg(long, value_name = "PATH", global = true)]
    pub db: Option<PathBuf>,

    /// The session named NAME in the project (a run creates it when no
    /// session has that name; with -n, a run creates it and refuses a name
    /// that is taken).
    #[arg(long, value_name = "NAME", global = true)]
    pub name: Option<String>,

    /// The session whose id starts with PREFIX (case-insensitive; `ah
    /// sessions` lists them).
    #[arg(short = 'S', long = "session", value_name = "PREFIX", global = true)]
    pub session: Option<String>,
}

impl SessionArgs {
    pub(crate) fn choice(&self) -> SessionChoice {
        SessionChoice {
            db: self.db.clone(),
            name: self.name.clone(),
            session: self.session.clone(),
        }
    }
}

impl RunArgs {
    /// The run's options; `matches` (of the command that holds these
    /// arguments) tells which defaults the user gave explicitly.
    pub(crate) fn options(&self, matches: &ArgMatches) -> RunOptions {
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        let sandbox = &self.sandbox;
        RunOptions {
            prompt: self.prompt.clone(),
            project: self.project.clone(),
            overrides: self.overrides.clone(),
            config: Default::default(),
            backend: self.backend,
            image: self.image.clone(),
            sandbox: SandboxOptions {
                runtime: sandbox.runtime.clone(),
                memory: sandbox.memory.clone(),
                disk_budget: sandbox.disk_budget,
                pids_limit: sandbox.pids_limit,
                strict_limits: sandbox.strict_limits,
                ulimits: sandbox.ulimits.clone(),
                network: sandbox.network,
                allow_hosts: sandbox.allow_hosts.clone(),
                env: sandbox.env.clone(),
                cleanup: Default::default(),
                connection: self.connection.clone(),
            },
            review: self.review,
            skills: self.skills.clone(),
            model: self.model.clone(),
            new_session: self.new_session,
            session: self.session.choice(),
            steer: self.steer.clone(),
            followup: self.followup.clone(),
            wait: self.wait,
            no_restore: self.no_restore,
            json: self.json,
            max_tools: self.max_tools,
            bash_timeout: self.bash_timeout,
            loop_window: self.loop_window,
            compact_reserve: self.compact_reserve,
            no_commit: self.no_commit,
            policy: self.policy.clone(),
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            output_limits: self.output_limits.clone(),
            max_artifact_size: self.max_artifact_size,
            given: OnCommandLine {
                backend: given("backend"),
                connection: self.connection.is_some(),
                loop_window: given("loop_window"),
                compact_reserve: given("compact_reserve"),
                max_artifact_size: given("max_artifact_size"),
                memory: given("memory"),
                pids_limit: given("pids_limit"),
            },
        }
    }
}

/// `--backend`: its values and what each means.
fn backend_parser() -> impl TypedValueParser<Value = BackendKind> {
    PossibleValuesParser::new([
        PossibleValue::new("podman").help("Rootless podman container (the default)"),
        PossibleValue::new("podman-remote")
            .help("A podman container on another machine (podman's remote connections)"),
        PossibleValue::new("none").help("No sandbox: commands run on the host, in the work copy"),
    ])
    .map(|value| match value.as_str() {
        "none" => BackendKind::None,
        "podman-remote" => BackendKind::PodmanRemote,
        _ => BackendKind::Podman,
    })
}

/// `--network`: its values and what each means.
fn network_parser() -> impl TypedValueParser<Value = NetworkMode> {
    PossibleValuesParser::new([
        PossibleValue::new("none").help("No network at all (the default)"),
        PossibleValue::new("proxy").help(
            "Only `CONNECT` tunnels to allowlisted `host:port` targets, through a proxy on the host",
        ),
        PossibleValue::new("full").help(
            "Full outbound network through a user-mode stack (slirp4netns or pasta): anything \
             the container can reach, the model can",
        ),
    ])
    .map(|value| match value.as_str() {
        "proxy" => NetworkMode::Proxy,
        "full" => NetworkMode::Full,
        _ => NetworkMode::None,
    })
}

/// `--review`: its values.
fn review_parser() -> impl TypedValueParser<Value = ReviewMode> {
    PossibleValuesParser::new(["ask", "auto", "never"]).map(|value| match value.as_str() {
        "auto" => ReviewMode::Auto,
        "never" => ReviewMode::Never,
        _ => ReviewMode::Ask,
    })
}

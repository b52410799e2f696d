//! The subcommands besides running a task: `ah apply`, `ah review`,
//! `ah report`, `ah runs`, `ah doctor`, `ah image build`, `ah kube
//! manifest`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use console::style;

use super::args::RunArgs;
use super::output::Output;
use super::review;
use super::{EXIT_ERROR, EXIT_OK};
use ah_core::batch::BatchOptions;
use ah_core::present::terminal_safe;
use ah_core::report;
use ah_core::run::{Engine, RunOptions, Tone, resolve_project};
use ah_core::runs::{self, Reopened, RunSummary};
use ah_core::sandbox::{self, ImageSource, Severity};

/// `ah report`: the page on the runs asked for, written to `out`.
pub(super) fn report(
    project: Option<&Path>,
    runs: &[String],
    batch: Option<&Path>,
    out: &Path,
) -> Result<i32> {
    let project = resolve_project(project)?;
    let select = match batch {
        Some(results) => report::Select::Batch(results),
        None if runs.is_empty() => report::Select::Newest,
        None => report::Select::Runs(runs),
    };
    let page = report::report(&project, select)?;
    std::fs::write(out, page).with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!(
        "report written to {}",
        terminal_safe(&out.display().to_string())
    );
    Ok(EXIT_OK)
}

/// `ah apply RUN`: applies a saved run's patch the same way a review does.
pub(super) fn apply(
    project: Option<&Path>,
    run_id: &str,
    no_commit: bool,
    force: bool,
) -> Result<i32> {
    let project = resolve_project(project)?;
    let applied = runs::apply(&project, run_id, no_commit, force)?;
    let rest = applied.to_string();
    eprintln!(
        "{}",
        review::line(Tone::Good, "applied:", &terminal_safe(&rest))
    );
    Ok(EXIT_OK)
}

/// `ah review [RUN]`: the review of a saved run again; a revise there is
/// a new run of its session with the user's notes.
pub(super) async fn review(run: &RunArgs, matches: &clap::ArgMatches) -> Result<i32> {
    let mut options = run.options(matches);
    let project = resolve_project(options.project.as_deref())?;
    let mut output = Output::new(run.json);
    let run_id = run.prompt.first().map(String::as_str);
    match runs::reopen(&project, run_id, &mut output)? {
        Reopened::Done(outcome) => Ok(super::exit_code(outcome)),
        Reopened::Revise {
            session_db,
            message,
        } => {
            options.prompt = vec![message];
            options.session.db = Some(session_db);
            let outcome = ah_core::run::run(options, Engine::Agent, &mut output).await?;
            Ok(super::exit_code(outcome))
        }
    }
}

/// `ah batch TASKS`: every task, then the summary; 1 when a task errored.
pub(super) async fn batch(
    run: &RunArgs,
    matches: &clap::ArgMatches,
    out: Option<PathBuf>,
) -> Result<i32> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let options = BatchOptions {
        tasks: PathBuf::from(run.prompt.first().map_or("", String::as_str)),
        out,
        jobs: run.jobs.map_or(cores, |j| j as usize),
        base: run.options(matches),
    };
    let say: ah_core::batch::Say = std::sync::Arc::new(|line: &str| eprintln!("{line}"));
    let summary = ah_core::batch::batch(options, say).await?;
    eprintln!(
        "batch: {} done, {} not done, {} errored, {} skipped; tokens {} in, {} out; {}; \
         {:.1} s; results in {}",
        summary.done,
        summary.not_done,
        summary.errored,
        summary.skipped,
        summary.tokens.input_tokens,
        summary.tokens.output_tokens,
        summary.cost_usd.map_or_else(
            || "cost unknown (a model had no price)".to_string(),
            |dollars| format!("cost {}", ah_core::cost::usd(dollars))
        ),
        summary.wall.as_secs_f64(),
        summary.results.display()
    );
    Ok(if summary.errored > 0 {
        EXIT_ERROR
    } else {
        EXIT_OK
    })
}

/// `ah runs`: one line per run, newest first.
pub(super) fn runs(project: Option<&Path>) -> Result<i32> {
    let project = resolve_project(project)?;
    let listed = runs::list(&project)?;
    if listed.is_empty() {
        eprintln!("no runs yet in {}", project.display());
        return Ok(EXIT_OK);
    }
    for run in listed {
        println!("{}", run_line(&run));
    }
    Ok(EXIT_OK)
}

/// `ah kube manifest RUN`: the run's objects on stdout, what differs from
/// the run on stderr.
pub(super) fn kube_manifest(
    project: Option<&Path>,
    run_id: &str,
    runtime_image: Option<String>,
) -> Result<i32> {
    let project = resolve_project(project)?;
    let options = ah_core::kube::KubeOptions { runtime_image };
    let written = ah_core::kube::manifest(&project, run_id, &options)?;
    for note in &written.notes {
        eprintln!("note: {}", terminal_safe(note));
    }
    print!("{}", written.yaml);
    Ok(EXIT_OK)
}

/// `ah doctor`: one line per check; non-zero when podman cannot run.
pub(super) async fn doctor(image: Option<&str>, options: &RunOptions) -> Result<i32> {
    let found = sandbox::doctor(image, options).await;
    for check in &found.checks {
        let mark = match (check.ok, check.severity) {
            (true, _) => style("ok  ").green(),
            (false, Severity::Warning) => style("warn").yellow(),
            (false, Severity::Error) => style("FAIL").red(),
        };
        println!("{mark} {}: {}", check.name, check.detail);
        if let (false, Some(fix)) = (check.ok, &check.fix) {
            println!("     fix: {fix}");
        }
    }
    if found.ready {
        println!("the podman sandbox is ready");
        Ok(EXIT_OK)
    } else {
        println!(
            "the podman sandbox cannot run here; fix the checks above, or pass --backend none to run tools unsandboxed on a copy"
        );
        Ok(EXIT_ERROR)
    }
}

/// `ah image build`: builds the sandbox image (or the image of a
/// Containerfile), showing progress.
pub(super) async fn image_build(
    name: Option<&str>,
    source: ImageSource,
    containerfile: Option<PathBuf>,
) -> Result<i32> {
    let options = sandbox::build_options(name, source, containerfile);
    let report = super::image_progress::build_with_display(&options, false).await?;
    eprintln!(
        "{} image {} built in {:.0}s",
        style("done:").green().bold(),
        options.image,
        report.duration.as_secs_f64()
    );
    Ok(EXIT_OK)
}

/// `ah image build --engine podman-remote`: the image, built here, loaded
/// into the remote engine.
pub(super) async fn image_send(
    name: Option<&str>,
    engine: &ah_core::sandbox::Connection,
) -> Result<i32> {
    let image = name.unwrap_or(ah_core::sandbox::DEFAULT_IMAGE);
    let line = match sandbox::send_image(name, engine).await? {
        ah_core::sandbox::Sent::AlreadyThere => "is there already",
        ah_core::sandbox::Sent::Loaded => "loaded",
    };
    eprintln!("image {image} on {}: {line}", terminal_safe(engine.name()));
    Ok(EXIT_OK)
}

/// Whether `ah image build --if-stale` has nothing to do: the image is
/// there and of this ah's recipe (said on stderr).
pub(super) async fn image_is_current(name: Option<&str>) -> Result<bool> {
    let image = name.unwrap_or(ah_core::sandbox::DEFAULT_IMAGE);
    let current = sandbox::image_is_current(image).await?;
    match current {
        Some(true) => eprintln!("image {image} is up to date"),
        Some(false) => eprintln!("image {image} was built by another ah: building it anew"),
        None => eprintln!("image {image} is missing: building it"),
    }
    Ok(current == Some(true))
}

/// One line of `ah runs`: id, date, files and +/−, decision, task.
fn run_line(run: &RunSummary) -> String {
    let manifest = match &run.manifest {
        Ok(manifest) => manifest,
        Err(err) => return format!("{}  (no readable manifest: {err})", run.id),
    };
    let date: String = manifest
        .started_at
        .chars()
        .take(16)
        .collect::<String>()
        .replace('T', " ");
    let (files, added, removed) = manifest
        .patch
        .map_or((0, 0, 0), |p| (p.files, p.added, p.removed));
    let decision = manifest
        .review
        .as_ref()
        .map_or("unfinished", |r| r.decision.as_str());
    let task = manifest.task.lines().next().unwrap_or_default();
    let task: String = task.chars().take(60).collect();
    format!(
        "{}  {date}  {files:>3} files  +{added:<5} -{removed:<5} {decision:<12} {}",
        run.id,
        terminal_safe(&task)
    )
}

/// `ah completions SHELL`: the completion script on stdout. Written in one
/// piece so a closed pipe (`| head`) is an ordinary error, not a panic.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<i32> {
    use clap::CommandFactory;
    use std::io::Write;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut super::args::Cli::command(), "ah", &mut script);
    match std::io::stdout().lock().write_all(&script) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(err).context("cannot write the completion script"))
        }
        _ => Ok(EXIT_OK),
    }
}

/// `ah config`: the merged configuration with where each value came from.
pub(super) fn config(project: Option<&Path>, overrides: &[String]) -> Result<i32> {
    let project = resolve_project(project)?;
    let report = ah_core::config::report(&project, overrides)?;
    if report.files.is_empty() {
        let (global, own) = &report.looked_for;
        println!(
            "# no config file (looked for {} and {})",
            global.as_ref().map_or_else(
                || "no global config folder".to_string(),
                |f| f.display().to_string()
            ),
            own.display()
        );
    } else {
        let files: Vec<String> = report
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        println!("# config files, weakest first: {}", files.join(", "));
    }
    print!("{}", report.settings);
    // The tools the model is offered, and where each comes from.
    println!("# tools");
    for tool in &report.tools {
        match &tool.file {
            None => println!("{} = \"ah\"", tool.name),
            Some((path, description)) => println!(
                "{} = {:?}  # {}",
                tool.name,
                path.display().to_string(),
                terminal_safe(description)
            ),
        }
    }
    for server in &report.servers {
        let state = if server.started {
            "its tools are listed when a run starts it, in the sandbox"
        } else {
            "not started: enabled = false"
        };
        let name = terminal_safe(&server.name);
        println!(
            "{name}__* = {:?}  # {state}",
            format!("MCP server {name}, {}", server.source)
        );
    }
    Ok(EXIT_OK)
}

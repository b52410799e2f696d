//! The command-line edge: parses arguments into the core's options, hands
//! runs to `ah_core::run` with itself as the front-end (events shown, the
//! review asked, live keys read), and turns outcomes into exit codes (0
//! done, 1 error, 2 usage, 3 patch saved but not applied, 4 stopped at a
//! limit, 130 aborted).

pub(crate) mod args;
mod argv;
mod attempts_view;
mod colour;
mod commands;
mod compact;
mod diff_view;
pub(crate) mod display;
mod egress_helper;
mod image_progress;
mod live;
mod menu;
mod org_view;
mod output;
mod prune;
mod review;
mod review_hunks;
mod review_pick;
mod screen;
mod sessions;
mod summary;
mod undumpable;

use clap::{CommandFactory, FromArgMatches};

use ah_core::run::{self, Engine, Outcome};
use output::Output;

use ah_core::sandbox::ImageSource;
use args::{Cli, Command, ImageAction, KubeAction, RunsAction};

/// Exit code: the run finished (and its patch, if any, was handled as asked).
pub(crate) const EXIT_OK: i32 = 0;
/// Exit code: something failed; the message says what.
pub(crate) const EXIT_ERROR: i32 = 1;
/// Exit code: the command line was wrong.
pub(crate) const EXIT_USAGE: i32 = 2;
/// The exit code of a run's outcome (core's `Outcome::exit_code`: 3 saved
/// but not applied, 4 stopped at a limit, 5 a question nobody answered, 6
/// no attempt passed, 130 aborted).
fn exit_code(outcome: Outcome) -> i32 {
    outcome.exit_code()
}

/// Runs ah with the process's arguments and returns the exit code.
pub(crate) fn main() -> i32 {
    if let Err(err) = undumpable::mark() {
        eprintln!(
            "warning: ah could not hide its memory and environment from other processes \
             of your user (prctl PR_SET_DUMPABLE: {err})"
        );
    }
    if let Some(code) = egress_helper::sandbox_helper(std::env::args_os()) {
        return code;
    }
    let mut command = Cli::command();
    command.build();
    let line = argv::options_after_subcommand(&command, std::env::args_os().collect());
    let parsed = command
        .try_get_matches_from(line.args)
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => {
            // clap prints help and version to stdout with success, and usage
            // errors to stderr.
            let _ = err.print();
            if let Some(name) = line.subcommand
                && err.use_stderr()
            {
                eprintln!(
                    "note: `{name}` is a command, and options before it are its options; \
                     a task starting with the word `{name}` goes after `--`: \
                     ah [OPTIONS] -- {name} ..."
                );
            }
            return if err.use_stderr() {
                EXIT_USAGE
            } else {
                EXIT_OK
            };
        }
    };
    colour::settle(cli.run.color);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("ah: could not start the async runtime: {err}");
            return EXIT_ERROR;
        }
    };
    let result = runtime.block_on(dispatch(cli, matches));
    match result {
        Ok(code) => code,
        Err(err) => {
            // Errors quote paths and commands the model chose.
            eprintln!(
                "ah: {}",
                ah_core::present::terminal_safe(&format!("{err:#}"))
            );
            match err.downcast_ref::<run::UsageError>() {
                Some(_) => EXIT_USAGE,
                None => EXIT_ERROR,
            }
        }
    }
}

/// Runs the command the arguments name; returns its exit code.
async fn dispatch(cli: Cli, matches: clap::ArgMatches) -> anyhow::Result<i32> {
    match cli.command {
        None if cli.run.steer.is_some() || cli.run.followup.is_some() => {
            run::queue::send(&cli.run.options(&matches))
                .await
                .map(exit_code)
        }
        None => {
            let mut output = Output::new(cli.run.json);
            let options = cli.run.options(&matches);
            match cli.run.attempts() {
                Some(how) => run::best_of(options, Engine::Agent, how, &mut output).await,
                None => run::run(options, Engine::Agent, &mut output).await,
            }
            .map(exit_code)
        }
        Some(Command::Apply {
            run_id,
            no_commit,
            force,
        }) => commands::apply(cli.run.project.as_deref(), &run_id, no_commit, force),
        Some(Command::Batch { run, out }) => {
            let sub = matches.subcommand_matches("batch").unwrap_or(&matches);
            commands::batch(&run, sub, out).await
        }
        Some(Command::Review { run }) => {
            let sub = matches.subcommand_matches("review").unwrap_or(&matches);
            commands::review(&run, sub).await
        }
        Some(Command::Work {
            issue,
            max_rounds,
            run,
        }) => {
            // Clap matched `work`, so its own matches are there.
            let sub = matches.subcommand_matches("work").unwrap_or(&matches);
            let mut output = Output::new(run.json);
            let engine = Engine::Work { issue, max_rounds };
            match run.attempts() {
                Some(how) => run::best_of(run.options(sub), engine, how, &mut output).await,
                None => run::run(run.options(sub), engine, &mut output).await,
            }
            .map(exit_code)
        }
        Some(Command::Org {
            agents,
            max_ticks,
            idle_ticks,
            run,
        }) => {
            let sub = matches.subcommand_matches("org").unwrap_or(&matches);
            let mut output = Output::new(run.json);
            if run.attempts().is_some() {
                anyhow::bail!(run::UsageError::Message(
                    "ah org runs one attempt at a time: leave out -N".into()
                ));
            }
            let engine = Engine::Org(run::OrgRequest {
                agents,
                max_ticks,
                idle_ticks,
            });
            run::run(run.options(sub), engine, &mut output)
                .await
                .map(exit_code)
        }
        Some(Command::Report { runs, batch, out }) => {
            commands::report(cli.run.project.as_deref(), &runs, batch.as_deref(), &out)
        }
        Some(Command::Runs { action: None }) => commands::runs(cli.run.project.as_deref()),
        Some(Command::Runs {
            action:
                Some(RunsAction::Prune {
                    older_than,
                    keep,
                    dry_run,
                }),
        }) => prune::runs_prune(cli.run.project.as_deref(), older_than, keep, dry_run),
        Some(Command::Session(command)) => sessions::run(
            cli.run.project.as_deref(),
            &cli.run.session,
            &cli.run.overrides,
            command,
        ),
        Some(Command::Config) => commands::config(cli.run.project.as_deref(), &cli.run.overrides),
        Some(Command::Compact { model }) => {
            compact::compact(
                cli.run.project.as_deref(),
                &cli.run.session,
                model.as_deref(),
                &cli.run.overrides,
            )
            .await
        }
        Some(Command::Completions { shell }) => commands::completions(shell),
        Some(Command::Kube {
            action:
                KubeAction::Manifest {
                    run_id,
                    runtime_image,
                },
        }) => commands::kube_manifest(cli.run.project.as_deref(), &run_id, runtime_image),
        Some(Command::Doctor { image, engine }) => {
            let mut options = cli.run.options(&matches);
            engine.apply(&mut options);
            commands::doctor(image.as_deref(), &options).await
        }
        Some(Command::Image {
            action:
                ImageAction::Build {
                    image,
                    offline,
                    registry,
                    file,
                    if_stale,
                    engine,
                },
        }) => {
            let mut options = cli.run.options(&matches);
            engine.apply(&mut options);
            let remote = ah_core::sandbox::remote_engine(&options);
            if !(if_stale && commands::image_is_current(image.as_deref()).await?) {
                let source = match (offline, registry) {
                    (true, _) => ImageSource::Offline,
                    (_, true) => ImageSource::Registry,
                    _ => ImageSource::Auto,
                };
                commands::image_build(image.as_deref(), source, file).await?;
            }
            match remote {
                Some(engine) => commands::image_send(image.as_deref(), &engine).await,
                None => Ok(EXIT_OK),
            }
        }
    }
}

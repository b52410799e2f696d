//! The phases of a work session: what each may do (its step rules and host
//! tool), its system prompt (`sys/work/*.md`, replaceable in `.ah/sys/work/`),
//! the file it must leave under the run's `phases/` directory, and the
//! reminder it gets when it ends without that file.

use serde::Serialize;

use crate::agent::prompt;
use crate::config::ProjectFiles;
use ah_record::run::StepRules;

const PLAN: &str = include_str!("../../../../sys/work/plan.md");
const DO: &str = include_str!("../../../../sys/work/do.md");
const CHECK: &str = include_str!("../../../../sys/work/check.md");
const ANALYZE: &str = include_str!("../../../../sys/work/analyze.md");
const FIX: &str = include_str!("../../../../sys/work/fix.md");
const FRICTION: &str = include_str!("../../../../sys/work/friction.md");

/// One phase of a work session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Reads the project and writes `plan.md`; `/work` is read-only.
    Plan,
    /// Changes `/work` and writes `do.md`.
    Do,
    /// Runs the plan's validation commands and writes `check.md`;
    /// `/work` is read-only.
    Check,
    /// Reads the check report and gives a verdict.
    Act,
    /// After a `friction` verdict: writes `friction.md`, what blocked the work.
    Friction,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Plan => "plan",
            Phase::Do => "do",
            Phase::Check => "check",
            Phase::Act => "act",
            Phase::Friction => "friction",
        }
    }

    /// The phase's system prompt: `sys/work/<name>` or its project override.
    pub fn prompt(self, files: &ProjectFiles) -> std::io::Result<String> {
        let (name, builtin) = match self {
            Phase::Plan => ("work/plan.md", PLAN),
            Phase::Do => ("work/do.md", DO),
            Phase::Check => ("work/check.md", CHECK),
            Phase::Act => ("work/analyze.md", ANALYZE),
            Phase::Friction => ("work/friction.md", FRICTION),
        };
        Ok(prompt::part(files, name, builtin)?.trim_end().to_string())
    }

    /// What the phase's steps may do, before its host tool is added.
    pub fn rules(self) -> StepRules {
        match self {
            Phase::Do => StepRules::read_write(),
            Phase::Plan | Phase::Check => StepRules::read_only(),
            Phase::Act | Phase::Friction => StepRules::read_only().only(&["read"]),
        }
    }

    /// The file the phase leaves, relative to the run's `phases/`: the
    /// round numbers the files of phases that repeat.
    pub fn output(self, round: u32) -> String {
        match self {
            Phase::Plan => "plan/plan.md".to_string(),
            Phase::Do => format!("do/do-{round}.md"),
            Phase::Check => format!("check/check-{round}.md"),
            Phase::Act => format!("act/verdict-{round}.json"),
            Phase::Friction => "act/friction.md".to_string(),
        }
    }

    /// The name the model knows the phase's report by.
    pub fn report_name(self) -> &'static str {
        match self {
            Phase::Plan => "plan.md",
            Phase::Do => "do.md",
            Phase::Check => "check.md",
            Phase::Act => "the verdict",
            Phase::Friction => "friction.md",
        }
    }

    /// Told to the model when the phase ended without its output.
    pub fn reminder(self) -> String {
        match self {
            Phase::Act => "[ah: the act phase ended without a verdict. Call `verdict` now with \
                           `decision` done, fix or friction and a `summary`, then end your turn.]"
                .to_string(),
            _ => format!(
                "[ah: the {} phase ended without writing {}. Call `report` now with the whole \
                 {}, then end your turn.]",
                self.as_str(),
                self.report_name(),
                self.report_name()
            ),
        }
    }
}

/// The opening of a do round after a `fix` verdict: `sys/work/fix.md`.
pub fn fix_prompt(files: &ProjectFiles) -> std::io::Result<String> {
    Ok(prompt::part(files, "work/fix.md", FIX)?
        .trim_end()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looking_phases_are_read_only_and_only_do_writes() {
        for phase in [Phase::Plan, Phase::Check, Phase::Act, Phase::Friction] {
            let rules = phase.rules();
            assert!(rules.is_read_only(), "{phase:?}");
            let names: Vec<String> = rules
                .specs(ah_llm::models::EditFormat::Edit)
                .into_iter()
                .map(|s| s.name)
                .collect();
            assert!(
                !names.iter().any(|n| n == "write" || n == "edit"),
                "{names:?}"
            );
        }
        let names: Vec<String> = Phase::Do
            .rules()
            .specs(ah_llm::models::EditFormat::Edit)
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["read", "write", "edit", "bash"]);
    }

    #[test]
    fn prompts_are_built_in_unless_the_project_overrides_them() {
        let dir = tempfile::tempdir().unwrap();
        let files = || ProjectFiles::of_project(&dir.path().canonicalize().unwrap()).unwrap();
        assert!(
            Phase::Plan
                .prompt(&files())
                .unwrap()
                .contains("## Validation")
        );
        assert!(Phase::Act.prompt(&files()).unwrap().contains("`verdict`"));
        std::fs::create_dir_all(dir.path().join(".ah/sys/work")).unwrap();
        std::fs::write(dir.path().join(".ah/sys/work/check.md"), "CHECK HARDER\n").unwrap();
        assert_eq!(Phase::Check.prompt(&files()).unwrap(), "CHECK HARDER");
        assert!(fix_prompt(&files()).unwrap().contains("findings"));
    }

    #[test]
    fn repeated_phases_number_their_files() {
        assert_eq!(Phase::Plan.output(1), "plan/plan.md");
        assert_eq!(Phase::Do.output(2), "do/do-2.md");
        assert_eq!(Phase::Check.output(3), "check/check-3.md");
        assert_eq!(Phase::Act.output(1), "act/verdict-1.json");
        assert_eq!(Phase::Friction.output(2), "act/friction.md");
    }
}

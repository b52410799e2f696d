//! The first message of each phase: what the earlier phases left that this
//! one needs (the plan, the do report, the check report, the verdict),
//! quoted in full. Phases share no conversation, only these files, so each
//! one starts from what the previous ones wrote down.

use super::phase::Phase;
use super::tools::Verdict;

/// The phase files written so far, as the loop hands them on.
#[derive(Debug, Default, Clone)]
pub(super) struct Handoff {
    pub plan: Option<String>,
    pub done: Option<String>,
    pub check: Option<String>,
    pub verdict: Option<Verdict>,
}

/// The brief of `phase` in round `round` of at most `max_rounds`; `fix` is
/// the opening of a do round after a `fix` verdict (`sys/work/fix.md`).
pub(super) fn brief(
    phase: Phase,
    round: u32,
    max_rounds: u32,
    handoff: &Handoff,
    fix: &str,
) -> String {
    let mut text = format!(
        "[ah: work session, {} phase, round {round} of at most {max_rounds}]\n",
        phase.as_str()
    );
    let mut quote = |title: &str, body: &Option<String>| {
        if let Some(body) = body {
            text.push_str(&format!("\n## {title}\n\n{}\n", body.trim_end()));
        }
    };
    match phase {
        Phase::Plan => {}
        Phase::Do if handoff.verdict.is_some() => {
            let findings = handoff.verdict.as_ref().map(|v| v.summary.clone());
            quote("What to fix (the act phase's findings)", &findings);
            quote("The check report (check.md)", &handoff.check);
            quote("The plan (plan.md)", &handoff.plan);
        }
        Phase::Do | Phase::Check => {
            quote("The plan (plan.md)", &handoff.plan);
            if phase == Phase::Check {
                quote("What the do phase reports (do.md)", &handoff.done);
            }
        }
        Phase::Act => {
            quote("The plan (plan.md)", &handoff.plan);
            quote("The check report (check.md)", &handoff.check);
        }
        Phase::Friction => {
            let why = handoff.verdict.as_ref().map(|v| v.summary.clone());
            quote("What the act phase found", &why);
            quote("The check report (check.md)", &handoff.check);
        }
    }
    text.push('\n');
    text.push_str(&match phase {
        Phase::Plan => {
            "Plan the work for the issue above; write plan.md with `report`.".to_string()
        }
        Phase::Do if handoff.verdict.is_some() => {
            format!("{fix}\n\nWrite do.md for this round with `report`.")
        }
        Phase::Do => "Carry out the plan; write do.md with `report`.".to_string(),
        Phase::Check => {
            "Run the plan's validation commands; write check.md with `report`.".to_string()
        }
        Phase::Act if round >= max_rounds => "Give your verdict with `verdict`. This is the last \
             round: a `fix` verdict now ends the session with the work unfinished."
            .to_string(),
        Phase::Act => "Give your verdict with `verdict`.".to_string(),
        Phase::Friction => "Write friction.md with `report`.".to_string(),
    });
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::tools::Decision;

    fn handoff() -> Handoff {
        Handoff {
            plan: Some("PLAN TEXT".into()),
            done: Some("DO TEXT".into()),
            check: Some("CHECK TEXT".into()),
            verdict: None,
        }
    }

    #[test]
    fn each_phase_gets_the_files_it_needs() {
        let h = handoff();
        let check = brief(Phase::Check, 1, 3, &h, "FIX");
        assert!(
            check.contains("PLAN TEXT") && check.contains("DO TEXT"),
            "{check}"
        );
        assert!(!check.contains("CHECK TEXT"));
        let act = brief(Phase::Act, 1, 3, &h, "FIX");
        assert!(
            act.contains("CHECK TEXT") && !act.contains("last round"),
            "{act}"
        );
        assert!(brief(Phase::Act, 3, 3, &h, "FIX").contains("last round"));
        assert!(brief(Phase::Plan, 1, 3, &h, "FIX").ends_with("with `report`."));
    }

    #[test]
    fn a_fix_round_opens_with_the_findings_and_the_fix_prompt() {
        let mut h = handoff();
        h.verdict = Some(Verdict {
            decision: Decision::Fix,
            summary: "test_x fails: off by one".into(),
        });
        let text = brief(Phase::Do, 2, 3, &h, "FIX PROMPT");
        assert!(text.starts_with("[ah: work session, do phase, round 2 of at most 3]"));
        let findings = text.find("off by one").unwrap();
        assert!(findings < text.find("CHECK TEXT").unwrap());
        assert!(text.contains("FIX PROMPT"));
    }
}

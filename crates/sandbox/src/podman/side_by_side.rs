//! What containers started side by side in one process (the attempts of a
//! task, `ah -N`) learn once instead of each: every podman command costs
//! ~100 ms of CPU, and eight starts at once on two cores wait on each
//! other's. The sweep of containers that crashed runs left is done by the
//! first start of the process only (every run's detached cleanup sweeps
//! again as it ends). The facts of an image come from one `podman image
//! inspect` for the run's check that the image is there and the starts
//! that ask within [`SHARED_FOR`] of the first (a rebuilt image is seen by
//! the starts after that).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use super::rootfs::{self, ImageFacts};
use super::{Podman, PodmanError, stale};

/// How long the facts of an image answer other starts.
const SHARED_FOR: Duration = Duration::from_secs(2);

/// Whether a start of this process has swept already.
static SWEPT: AtomicBool = AtomicBool::new(false);

/// The facts being found, or found, for the latest image asked about.
static FACTS: Mutex<Option<Asked>> = Mutex::new(None);

/// One image's facts as the starts of a moment share them.
struct Asked {
    image: String,
    at: Instant,
    facts: Arc<OnceCell<ImageFacts>>,
}

/// Removes the containers crashed runs left, at the first start of the
/// process; the names removed (none at a later start).
pub(super) async fn sweep_once(podman: &Podman) -> Result<Vec<String>, PodmanError> {
    if SWEPT.swap(true, Ordering::SeqCst) {
        return Ok(Vec::new());
    }
    stale::cleanup_stale(podman).await
}

/// The facts of `image` (`None`: podman has no such image): those another
/// start found within [`SHARED_FOR`], or found now (and shared). A missing
/// image and a failure are not shared: the next start asks again (the
/// missing image may have been built in between).
pub(super) async fn image_facts(
    podman: &Podman,
    image: &str,
) -> Result<Option<ImageFacts>, PodmanError> {
    let cell = {
        let mut asked = FACTS.lock().unwrap_or_else(PoisonError::into_inner);
        match asked.as_ref() {
            Some(a) if a.image == image && a.at.elapsed() < SHARED_FOR => Arc::clone(&a.facts),
            _ => {
                let facts = Arc::new(OnceCell::new());
                *asked = Some(Asked {
                    image: image.to_string(),
                    at: Instant::now(),
                    facts: Arc::clone(&facts),
                });
                facts
            }
        }
    };
    let found = cell
        .get_or_try_init(|| async {
            match rootfs::inspect(podman, image).await {
                Ok(Some(facts)) => Ok(facts),
                Ok(None) => Err(None),
                Err(err) => Err(Some(err)),
            }
        })
        .await;
    match found {
        Ok(facts) => Ok(Some(facts.clone())),
        Err(None) => Ok(None),
        Err(Some(err)) => Err(err),
    }
}

//! The run's disk budget: the model can fill the work copy (and through it
//! the run directory and the host's disk) as fast as `dd` writes, and a
//! bind-mounted `/work` has no quota. After every step the run measures
//! what its directory holds — allocated blocks (`st_blocks`, so a sparse
//! file counts what it really takes), links never followed, each inode
//! once — and the free space of its filesystem, and stops once either
//! passes its limit.
//!
//! The walk is bounded in entries and time so that a tree of millions of
//! files cannot stall every step; a walk cut short counts what it saw,
//! which is a lower bound, and the free-space floor still holds.
//!
//! What a run writes at its end (the patch, the artifacts) is measured the
//! other way round, before it is written: files that take almost nothing
//! in the work copy (sparse ones, one file under many hard links) are
//! written out whole, once per name. Those writes take their bytes (whole
//! blocks) from the [`Room`] the budget and the floor leave, and what does
//! not fit is not written.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use ah_tools::bounds::size;

/// The default budget: what a run directory (work copy, shadow repo, step
/// files, patch) may take.
pub const DEFAULT_BUDGET: u64 = 10 * 1024 * 1024 * 1024;
/// The run stops when its filesystem has less than this free.
pub const MIN_FREE: u64 = 1024 * 1024 * 1024;
/// Most entries one measure looks at.
const MAX_ENTRIES: usize = 500_000;
/// Longest one measure takes.
const MAX_WALK: Duration = Duration::from_secs(2);

/// How much disk a run may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskBudget {
    /// Bytes the run directory may hold.
    pub max_bytes: u64,
    /// Bytes that must stay free on its filesystem.
    pub min_free: u64,
}

impl Default for DiskBudget {
    fn default() -> DiskBudget {
        DiskBudget {
            max_bytes: DEFAULT_BUDGET,
            min_free: MIN_FREE,
        }
    }
}

impl DiskBudget {
    /// `Err(why)` when the run directory `dir` holds more than the budget or
    /// its filesystem has less free than the floor; `why` names the limit
    /// and how to raise it.
    pub fn check(&self, dir: &Path) -> Result<(), String> {
        let used = allocated(dir);
        if used > self.max_bytes {
            return Err(format!(
                "the run's files take {}, over its disk budget of {} (raise it with \
                 --disk-budget SIZE or [sandbox] disk_budget in the config)",
                size(used),
                size(self.max_bytes)
            ));
        }
        match free_bytes(dir) {
            Some(free) if free < self.min_free => Err(format!(
                "the disk holding {} has {} free, under the {} a run leaves free (free some \
                 space and start again)",
                dir.display(),
                size(free),
                size(self.min_free)
            )),
            _ => Ok(()),
        }
    }
}

impl DiskBudget {
    /// What the writes at the end of a run may still take: what the run
    /// directory `dir` does not hold yet of the budget, and no more than
    /// its disk has free above the floor.
    pub fn room(&self, dir: &Path) -> Room {
        let (free, block) = match disk_space(dir) {
            Some(space) => space,
            None => (u64::MAX, DEFAULT_BLOCK),
        };
        let of_budget = self.max_bytes.saturating_sub(allocated(dir));
        let above_floor = free.saturating_sub(self.min_free);
        let (left, bound) = if above_floor < of_budget {
            (above_floor, Bound::Floor(self.min_free))
        } else {
            (of_budget, Bound::Budget(self.max_bytes))
        };
        Room { left, block, bound }
    }
}

/// The block size assumed where the filesystem does not say.
const DEFAULT_BLOCK: u64 = 4096;

/// What the writes at the end of a run may still take ([`DiskBudget::room`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    left: u64,
    /// A file takes whole blocks of this size.
    block: u64,
    bound: Bound,
}

/// What bounds a [`Room`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// The run's disk budget, of these bytes.
    Budget(u64),
    /// The free space its disk must keep, of these bytes.
    Floor(u64),
}

impl Room {
    /// A room of `left` bytes in blocks of `block`, measured from no run
    /// directory (the tests of what takes from a room use it).
    pub fn of(left: u64, block: u64) -> Room {
        Room {
            left,
            block: block.max(1),
            bound: Bound::Budget(left),
        }
    }

    /// Bytes left.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// The largest file that still fits.
    pub fn most(&self) -> u64 {
        self.left - self.left % self.block
    }

    /// The bytes a file or folder of `bytes` takes: whole blocks, a folder
    /// (or an empty file's name) at least one.
    pub fn cost(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.block).max(1).saturating_mul(self.block)
    }

    /// Takes `bytes` (already a [`Room::cost`]) if they fit; false, and
    /// nothing taken, when they do not.
    pub fn take(&mut self, bytes: u64) -> bool {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }

    /// What bounds this room, for a message: "the 90.0 MiB left of the
    /// run's disk budget of 100.0 MiB".
    pub fn describe(&self) -> String {
        match self.bound {
            Bound::Budget(max) => format!(
                "the {} left of the run's disk budget of {} (raise it with --disk-budget SIZE)",
                size(self.left),
                size(max)
            ),
            Bound::Floor(floor) => format!(
                "the {} its disk has free above the {} a run leaves free",
                size(self.left),
                size(floor)
            ),
        }
    }
}

/// Bytes allocated to everything under `dir`, each inode once, links not
/// followed; stops counting after [`MAX_ENTRIES`] entries or [`MAX_WALK`].
fn allocated(dir: &Path) -> u64 {
    let started = Instant::now();
    let mut seen = HashSet::new();
    let mut pending = vec![dir.to_path_buf()];
    let (mut total, mut entries) = (0u64, 0usize);
    while let Some(folder) = pending.pop() {
        let Ok(listing) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in listing.flatten() {
            entries += 1;
            if entries > MAX_ENTRIES || started.elapsed() > MAX_WALK {
                return total;
            }
            // `DirEntry::metadata` does not follow a symlink.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.nlink() > 1 && !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

/// Bytes free to an unprivileged user on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    disk_space(dir).map(|(free, _)| free)
}

/// Bytes free to an unprivileged user on the filesystem holding `dir`, and
/// its block size.
fn disk_space(dir: &Path) -> Option<(u64, u64)> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    let block = if stat.f_frsize == 0 {
        DEFAULT_BLOCK
    } else {
        stat.f_frsize
    };
    Some((stat.f_bavail.saturating_mul(block), block))
}

/// Parses a size such as `10G`, `500MiB`, `2g` or `1048576` (bytes) for
/// `--disk-budget` and `[sandbox] disk_budget`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad_size(text)),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| bad_size(text))
}

fn bad_size(text: &str) -> String {
    format!("{text:?} is not a disk size: give a positive number with K, M, G or T, e.g. 10G")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("10G"), Ok(10 << 30));
        assert_eq!(parse_size("500MiB"), Ok(500 << 20));
        assert_eq!(parse_size(" 2 gb "), Ok(2 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        for bad in ["", "0", "G", "1.5G", "10X", "-1G", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_room_at_the_end_is_what_the_budget_and_the_floor_leave() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("held"), vec![1u8; 1 << 20]).unwrap();
        let budget = DiskBudget {
            max_bytes: 3 << 20,
            min_free: 0,
        };
        let mut room = budget.room(dir.path());
        // What the folder holds is not left.
        assert_eq!(room.left(), 2 << 20, "{room:?}");
        assert!(
            room.describe()
                .contains("left of the run's disk budget of 3.0 MiB")
        );
        let file = room.cost((1 << 20) - 1);
        assert_eq!(file, 1 << 20, "whole blocks");
        assert!(room.take(file) && room.take(room.cost(1000)));
        assert!(!room.take(file), "a second MiB does not fit: {room:?}");
        assert!(room.take(room.cost(room.most())));
        assert_eq!(room.left(), 0);
        assert!(!room.take(room.cost(0)), "even an empty name takes a block");

        let full = DiskBudget {
            max_bytes: u64::MAX,
            min_free: u64::MAX,
        };
        let room = full.room(dir.path());
        assert_eq!(room.left(), 0);
        assert!(room.describe().contains("free above the"), "{room:?}");
    }

    #[test]
    fn sparse_files_count_their_blocks_and_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(run.join("work")).unwrap();
        let sparse = std::fs::File::create(run.join("work/sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        std::fs::write(run.join("work/data"), vec![1u8; 3 << 20]).unwrap();
        std::fs::hard_link(run.join("work/data"), run.join("work/again")).unwrap();
        // A big folder outside, linked from inside: not counted.
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/big"), vec![1u8; 8 << 20]).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), run.join("work/out")).unwrap();
        let used = allocated(&run);
        assert!((3 << 20..5 << 20).contains(&used), "{used}");

        let budget = DiskBudget {
            max_bytes: 2 << 20,
            min_free: 0,
        };
        let err = budget.check(&run).unwrap_err();
        assert!(err.contains("over its disk budget of 2.0 MiB"), "{err}");
        assert!(err.contains("--disk-budget"), "{err}");
        let roomy = DiskBudget {
            max_bytes: 8 << 20,
            min_free: 0,
        };
        assert_eq!(roomy.check(&run), Ok(()));
        let full = DiskBudget {
            max_bytes: u64::MAX,
            min_free: u64::MAX,
        };
        assert!(full.check(&run).unwrap_err().contains("free"));
    }
}

//! Blobs written as pack files rather than loose objects, for the baseline.
//!
//! A loose object is a file of its own, and on a large tree creating tens of
//! thousands of small files is what a loose-object baseline spends its time
//! on. Here the blobs are appended to a pack held in memory and handed to
//! libgit2's indexer, which checks every object (its id, its compressed
//! data, the pack's trailing checksum) and writes the pack and its index
//! into `objects/pack/`, exactly as for a fetched pack.
//!
//! Objects are stored whole, without deltas (a run's repo is short-lived;
//! searching for deltas costs more time than the disk space it saves), and
//! compressed at zlib's fastest level. A pack is handed over once its
//! compressed content passes [`PACK_BYTES`], so memory stays bounded however
//! large the tree; a blob already packed is not packed again.

use std::collections::HashSet;
use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};
use git2::{ObjectType, Odb, Oid, Repository};
use sha1::{Digest, Sha1};

/// Compressed content after which a pack is handed to the indexer.
const PACK_BYTES: usize = 64 * 1024 * 1024;

/// The pack object type of a blob.
const OBJ_BLOB: u8 = 3;

/// Packs blobs; [`BlobPacker::finish`] hands over the last pack.
pub(super) struct BlobPacker<'r> {
    odb: Odb<'r>,
    /// The packed entries of the pack being filled, without header and
    /// trailer.
    entries: Vec<u8>,
    count: u32,
    /// Compressed content after which the pack is handed over.
    limit: usize,
    packed: HashSet<Oid>,
    zlib: Compress,
}

impl<'r> BlobPacker<'r> {
    pub(super) fn new(repo: &'r Repository) -> Result<BlobPacker<'r>, git2::Error> {
        Ok(BlobPacker {
            odb: repo.odb()?,
            entries: Vec::new(),
            count: 0,
            limit: PACK_BYTES,
            packed: HashSet::new(),
            zlib: Compress::new(Compression::fast(), true),
        })
    }

    /// Packs `data` as a blob and returns its id. The blob can be read from
    /// the repo once [`BlobPacker::finish`] has returned.
    pub(super) fn add(&mut self, data: &[u8]) -> io::Result<Oid> {
        let id = Oid::hash_object(ObjectType::Blob, data).map_err(io::Error::other)?;
        if !self.packed.insert(id) {
            return Ok(id);
        }
        push_entry_header(&mut self.entries, data.len() as u64);
        self.deflate(data)?;
        self.count += 1;
        if self.entries.len() >= self.limit {
            self.hand_over()?;
        }
        Ok(id)
    }

    /// Hands the last pack to the indexer.
    pub(super) fn finish(mut self) -> io::Result<()> {
        self.hand_over()
    }

    /// Appends `data`, zlib-compressed, to the entries.
    fn deflate(&mut self, data: &[u8]) -> io::Result<()> {
        self.zlib.reset();
        loop {
            let done = self.zlib.total_in() as usize;
            let rest = &data[done..];
            // zlib's bound for one call: the input plus a little per block.
            self.entries.reserve(rest.len() + rest.len() / 1000 + 64);
            let status = self
                .zlib
                .compress_vec(rest, &mut self.entries, FlushCompress::Finish)
                .map_err(io::Error::other)?;
            if status == Status::StreamEnd {
                return Ok(());
            }
        }
    }

    /// Writes the pack being filled (header, entries, checksum) through the
    /// indexer and starts a new one.
    fn hand_over(&mut self) -> io::Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let mut header = Vec::with_capacity(12);
        header.extend_from_slice(b"PACK");
        header.extend_from_slice(&2u32.to_be_bytes());
        header.extend_from_slice(&self.count.to_be_bytes());
        let mut checksum = Sha1::new();
        checksum.update(&header);
        checksum.update(&self.entries);
        let mut writer = self.odb.packwriter().map_err(io::Error::other)?;
        writer.write_all(&header)?;
        writer.write_all(&self.entries)?;
        writer.write_all(&checksum.finalize())?;
        writer.commit().map_err(io::Error::other)?;
        self.entries.clear();
        self.count = 0;
        Ok(())
    }
}

/// A pack entry's header: the type and the inflated size, four bits in the
/// first byte and seven in each next one, low bits first.
fn push_entry_header(out: &mut Vec<u8>, size: u64) {
    let mut byte = (OBJ_BLOB << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::git;

    #[test]
    fn packed_blobs_read_back_and_pass_git_verify_pack() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        // Content that does not compress (so a pack is handed over after
        // it), sizes around the header's 4- and 11-bit boundaries, an empty
        // blob, and a repeat of a blob in the first pack.
        let noise = (0..50_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8);
        let mut blobs: Vec<Vec<u8>> = vec![noise.collect()];
        for n in [0, 1, 15, 16, 2047, 2048, 100_000] {
            blobs.push((0..n).map(|i| (i % 7) as u8).collect());
        }
        blobs.push(blobs[0].clone());
        let mut packer = BlobPacker::new(&repo).unwrap();
        // A small limit, so the blobs are spread over several packs.
        packer.limit = 1000;
        let ids: Vec<Oid> = blobs.iter().map(|b| packer.add(b).unwrap()).collect();
        packer.finish().unwrap();

        for (id, blob) in ids.iter().zip(&blobs) {
            assert_eq!(*id, Oid::hash_object(ObjectType::Blob, blob).unwrap());
            assert_eq!(repo.find_blob(*id).unwrap().content(), &blob[..]);
        }
        let counts = git(dir.path(), &["--git-dir", ".", "count-objects", "-v"]);
        // Nine blobs, one a repeat; no loose objects; more than one pack.
        assert!(counts.lines().any(|l| l == "in-pack: 8"), "{counts}");
        assert!(counts.lines().any(|l| l == "count: 0"), "{counts}");
        assert!(!counts.lines().any(|l| l == "packs: 1"), "{counts}");
        for entry in std::fs::read_dir(dir.path().join("objects/pack")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "idx") {
                git(
                    dir.path(),
                    &["--git-dir", ".", "verify-pack", path.to_str().unwrap()],
                );
            }
        }
    }

    #[test]
    fn nothing_added_writes_no_pack() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        BlobPacker::new(&repo).unwrap().finish().unwrap();
        let packs = std::fs::read_dir(dir.path().join("objects/pack")).unwrap();
        assert_eq!(packs.count(), 0);
    }
}

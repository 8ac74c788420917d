//! The files one fuzz input consists of: the database and its side files, as bytes, and
//! how they go to and from a simulated disk or a folder.
//!
//! Invariants: a file absent from an input is `None`, never an empty vector, so an input
//! that had no journal reproduces as one without a journal.

use std::path::{Path, PathBuf};

use inpage_sim::SimVfs;

/// Name of the database file on the simulated disk.
pub const DB_NAME: &str = "fuzz.db";

/// The files one input consists of: the database and its side files (absent = `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Files {
    pub db: Option<Vec<u8>>,
    pub journal: Option<Vec<u8>>,
    pub wal: Option<Vec<u8>>,
    /// `dash`'s shadow file.
    pub shadow: Option<Vec<u8>>,
    /// `waldio`'s preallocated log.
    pub waldio: Option<Vec<u8>>,
    /// The creation marker a cut layout leaves (`pager/create.rs`).
    pub create: Option<Vec<u8>>,
}

/// Which file of a [`Files`] a mutation targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Db,
    Journal,
    Wal,
    Shadow,
    Waldio,
    Create,
}

impl Target {
    pub const ALL: [Target; 6] = [
        Target::Db,
        Target::Journal,
        Target::Wal,
        Target::Shadow,
        Target::Waldio,
        Target::Create,
    ];
    /// The targets the mutation table draws from by index (`mutate`): the files of the
    /// modes the fuzzer was written for, so the seeded input streams stay as they were.
    /// Side files added later (`Shadow`, `Waldio`, `Create`) are reached through `pick_target`,
    /// which draws among the files an input has.
    pub const DRAWN: [Target; 3] = [Target::Db, Target::Journal, Target::Wal];

    /// File name suffix on disk and in saved findings.
    pub fn file_name(self) -> &'static str {
        match self {
            Target::Db => DB_NAME,
            Target::Journal => "fuzz.db-journal",
            Target::Wal => "fuzz.db-wal",
            Target::Shadow => "fuzz.db-dash",
            Target::Waldio => "fuzz.db-waldio",
            Target::Create => "fuzz.db-create",
        }
    }
}

impl Files {
    pub fn get(&self, t: Target) -> Option<&Vec<u8>> {
        match t {
            Target::Db => self.db.as_ref(),
            Target::Journal => self.journal.as_ref(),
            Target::Wal => self.wal.as_ref(),
            Target::Shadow => self.shadow.as_ref(),
            Target::Waldio => self.waldio.as_ref(),
            Target::Create => self.create.as_ref(),
        }
    }

    pub fn slot(&mut self, t: Target) -> &mut Option<Vec<u8>> {
        match t {
            Target::Db => &mut self.db,
            Target::Journal => &mut self.journal,
            Target::Wal => &mut self.wal,
            Target::Shadow => &mut self.shadow,
            Target::Waldio => &mut self.waldio,
            Target::Create => &mut self.create,
        }
    }

    /// Read the database and its side files from a simulated disk.
    pub fn from_sim(vfs: &SimVfs) -> Files {
        let mut f = Files::default();
        for t in Target::ALL {
            *f.slot(t) = vfs.read_file(Path::new(t.file_name()));
        }
        f
    }

    /// A fresh simulated disk holding exactly these files.
    pub fn to_sim(&self) -> SimVfs {
        let vfs = SimVfs::new();
        for t in Target::ALL {
            if let Some(bytes) = self.get(t) {
                vfs.write_file(Path::new(t.file_name()), bytes);
            }
        }
        vfs
    }

    /// Write the files into `dir` (for saved findings and regression inputs).
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for t in Target::ALL {
            let p = dir.join(t.file_name());
            match self.get(t) {
                Some(bytes) => std::fs::write(&p, bytes)?,
                None => {
                    if p.exists() {
                        std::fs::remove_file(&p)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Read files saved by [`Files::save`].
    pub fn load(dir: &Path) -> std::io::Result<Files> {
        let mut f = Files::default();
        for t in Target::ALL {
            let p = dir.join(t.file_name());
            if p.exists() {
                *f.slot(t) = Some(std::fs::read(&p)?);
            }
        }
        Ok(f)
    }

    pub fn total_len(&self) -> usize {
        Target::ALL
            .iter()
            .map(|t| self.get(*t).map_or(0, Vec::len))
            .sum()
    }
}

/// Path of the database on the simulated disk.
pub fn db_path() -> PathBuf {
    PathBuf::from(DB_NAME)
}

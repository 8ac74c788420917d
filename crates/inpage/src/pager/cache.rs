//! The shared cache of committed page images.
//!
//! Invariants:
//! - An entry is the latest committed image of its page (or, while a commit is being
//!   written, the image that commit is making durable).
//! - A *pinned* entry is never evicted. The pager pins every page of a commit in flight,
//!   because until the commit's writes are done the file may hold neither the old nor the
//!   new image in full; readers must get the image from here, never from the file.
//! - Eviction is least-recently-used among unpinned entries, so `capacity` bounds the
//!   unpinned working set; pinned entries may exceed it for the length of a commit.

use std::collections::BTreeMap;

use crate::error::Pgno;
use crate::page::PageRef;
use crate::pager::PgnoMap;

struct Entry {
    page: PageRef,
    tick: u64,
    pinned: bool,
}

/// LRU cache of page images.
pub(crate) struct Cache {
    capacity: usize,
    entries: PgnoMap<Entry>,
    /// tick -> pgno for unpinned entries, oldest first.
    lru: BTreeMap<u64, Pgno>,
    tick: u64,
    pub hits: u64,
    pub misses: u64,
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            entries: PgnoMap::default(),
            lru: BTreeMap::new(),
            tick: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn bump(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Look up a page, marking it recently used.
    pub fn get(&mut self, pgno: Pgno) -> Option<PageRef> {
        let t = self.bump();
        match self.entries.get_mut(&pgno) {
            Some(e) => {
                if !e.pinned {
                    self.lru.remove(&e.tick);
                    self.lru.insert(t, pgno);
                }
                e.tick = t;
                self.hits += 1;
                Some(e.page.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Insert or replace an image; `pinned` entries stay until `unpin`.
    pub fn insert(&mut self, pgno: Pgno, page: PageRef, pinned: bool) {
        let t = self.bump();
        if let Some(old) = self.entries.insert(
            pgno,
            Entry {
                page,
                tick: t,
                pinned,
            },
        ) {
            if !old.pinned {
                self.lru.remove(&old.tick);
            }
        }
        if !pinned {
            self.lru.insert(t, pgno);
        }
        self.evict();
    }

    /// Drop an entry (pinned or not).
    pub fn remove(&mut self, pgno: Pgno) {
        if let Some(old) = self.entries.remove(&pgno) {
            if !old.pinned {
                self.lru.remove(&old.tick);
            }
        }
    }

    /// Make a pinned entry evictable again.
    pub fn unpin(&mut self, pgno: Pgno) {
        if let Some(e) = self.entries.get_mut(&pgno) {
            if e.pinned {
                e.pinned = false;
                self.lru.insert(e.tick, pgno);
            }
        }
        self.evict();
    }

    fn evict(&mut self) {
        while self.entries.len() > self.capacity {
            let Some((_, pgno)) = self.lru.pop_first() else {
                break; // everything left is pinned
            };
            self.entries.remove(&pgno);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn page(b: u8) -> PageRef {
        Arc::from(vec![b; 8])
    }

    #[test]
    fn evicts_least_recently_used_unpinned() {
        let mut c = Cache::new(2);
        c.insert(1, page(1), false);
        c.insert(2, page(2), false);
        c.get(1);
        c.insert(3, page(3), false);
        assert!(c.get(2).is_none(), "2 was least recently used");
        assert!(c.get(1).is_some() && c.get(3).is_some());
    }

    #[test]
    fn pinned_entries_survive_until_unpinned() {
        let mut c = Cache::new(1);
        c.insert(1, page(1), true);
        c.insert(2, page(2), true);
        c.insert(3, page(3), false);
        assert_eq!(c.len(), 2, "the unpinned entry goes first");
        assert!(c.get(1).is_some() && c.get(2).is_some());
        c.unpin(1);
        c.unpin(2);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn replacing_keeps_one_entry() {
        let mut c = Cache::new(4);
        c.insert(1, page(1), false);
        c.insert(1, page(9), true);
        c.unpin(1);
        assert_eq!(c.get(1).unwrap()[0], 9);
        assert_eq!(c.len(), 1);
    }
}

//! The catalog: a byte-keyed tree (memcmp order) at `header.catalog_root` mapping a tree's
//! name to its root page and key kind.
//!
//! Invariant: a record is written in the same transaction that creates the tree's root,
//! and removed in the one that frees it, so the catalog and the page accounting agree at
//! every commit.

use crate::error::{Error, Pgno, Result};
use crate::txn::key::KeyKind;

/// Flag: the tree orders keys with a caller-supplied comparator.
pub(crate) const FLAG_CUSTOM_CMP: u8 = 1;
/// Flag: the tree's order is defined by the caller at each call (a probe), so the engine
/// refuses key-based calls on it and `check` does not verify its key order. Added after
/// format 1 without a version bump: files that never set it read exactly as before.
pub(crate) const FLAG_EXTERNAL_ORDER: u8 = 2;

/// A catalog record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeInfo {
    pub name: String,
    pub root: Pgno,
    pub kind: KeyKind,
    /// Whether keys are ordered by a caller-supplied comparator.
    pub custom_comparator: bool,
    /// Whether the order is given by the caller's probe at each call (a probe-ordered
    /// tree, see `WriteTxn::create_probe_tree`).
    pub external_order: bool,
}

impl TreeInfo {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(6);
        v.push(self.kind.code());
        let mut flags = 0;
        if self.custom_comparator {
            flags |= FLAG_CUSTOM_CMP;
        }
        if self.external_order {
            flags |= FLAG_EXTERNAL_ORDER;
        }
        v.push(flags);
        v.extend_from_slice(&self.root.to_le_bytes());
        v
    }

    pub(crate) fn decode(catalog_root: Pgno, name: &[u8], v: &[u8]) -> Result<TreeInfo> {
        let bad = |why: &str| {
            Error::corrupt(
                catalog_root,
                format!(
                    "catalog record for {:?}: {why}",
                    String::from_utf8_lossy(name)
                ),
            )
        };
        if v.len() != 6 {
            return Err(bad("wrong length"));
        }
        let kind = KeyKind::from_code(v[0]).ok_or_else(|| bad("unknown key kind"))?;
        if v[1] & !(FLAG_CUSTOM_CMP | FLAG_EXTERNAL_ORDER) != 0 {
            return Err(bad("unknown flags"));
        }
        // Only byte trees are probe-ordered, and their order is never a comparator's.
        if v[1] & FLAG_EXTERNAL_ORDER != 0
            && (kind != KeyKind::Bytes || v[1] & FLAG_CUSTOM_CMP != 0)
        {
            return Err(bad(
                "probe-ordered flag on a tree that cannot be probe-ordered",
            ));
        }
        let name = String::from_utf8(name.to_vec()).map_err(|_| bad("name is not UTF-8"))?;
        Ok(TreeInfo {
            name,
            root: crate::le::get_u32(v, 2),
            kind,
            custom_comparator: v[1] & FLAG_CUSTOM_CMP != 0,
            external_order: v[1] & FLAG_EXTERNAL_ORDER != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(kind: KeyKind, custom: bool, external: bool) -> TreeInfo {
        TreeInfo {
            name: "t".into(),
            root: 9,
            kind,
            custom_comparator: custom,
            external_order: external,
        }
    }

    #[test]
    fn records_round_trip_and_old_flags_still_read() {
        for i in [
            info(KeyKind::Int, false, false),
            info(KeyKind::Bytes, true, false),
            info(KeyKind::Bytes, false, true),
        ] {
            assert_eq!(TreeInfo::decode(1, b"t", &i.encode()).unwrap(), i);
        }
        // A record written before the probe flag existed.
        let old = [2u8, FLAG_CUSTOM_CMP, 9, 0, 0, 0];
        assert_eq!(
            TreeInfo::decode(1, b"t", &old).unwrap(),
            info(KeyKind::Bytes, true, false)
        );
    }

    #[test]
    fn impossible_flag_combinations_are_corrupt() {
        for bad in [
            info(KeyKind::Int, false, true),
            info(KeyKind::Bytes, true, true),
        ] {
            let r = TreeInfo::decode(1, b"t", &bad.encode());
            assert!(matches!(r, Err(Error::Corrupt { .. })), "{r:?}");
        }
        let r = TreeInfo::decode(1, b"t", &[2, 4, 9, 0, 0, 0]);
        assert!(matches!(r, Err(Error::Corrupt { .. })), "{r:?}");
    }
}

//! docs/FORMAT.md against the bytes the engine writes.
//!
//! The byte tables in docs/FORMAT.md are parsed here and each documented field is read at
//! its documented offset from files the engine wrote on a simulated disk, then compared
//! with what the engine itself decodes (or recomputed, for checksums). Moving a field,
//! adding a journal mode or changing a checksum without updating the doc fails this test,
//! which is what keeps the doc the format's description rather than a stale copy.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use inpage::internals::decode_slot;
use inpage::Header;
use inpage::{Database, JournalMode, KeyKind};
use inpage_sim::SimVfs;

const DOC: &str = include_str!("../../../docs/FORMAT.md");
const PS: usize = 1024;
const USABLE: usize = PS - 4;

/// A documented field: its offset, and its size when the doc gives a number.
#[derive(Debug)]
struct Field {
    offset: usize,
    size: usize,
}

/// The rows of the first table after the line `heading` whose offset [`offset_at`]
/// evaluates, by name (a size given as an expression, e.g. `usable − 8`, reads as 0).
fn table(heading: &str) -> BTreeMap<String, Field> {
    let mut lines = DOC.lines().skip_while(|l| l.trim() != heading);
    assert!(
        lines.next().is_some(),
        "heading {heading:?} not in FORMAT.md"
    );
    let rows: Vec<&str> = lines
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(rows.len() > 2, "no table under {heading:?}");
    let mut out = BTreeMap::new();
    for row in &rows[2..] {
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(offset) = offset_at(cols[1]) else {
            continue;
        };
        let size = cols[2].parse().unwrap_or(0);
        out.insert(
            cols[3].trim_matches('`').to_string(),
            Field { offset, size },
        );
    }
    out
}

/// A documented offset at page size `PS`: a number, `usable`, or `N + ps`.
fn offset_at(s: &str) -> Option<usize> {
    match s.trim_matches('`') {
        "usable" => Some(USABLE),
        s => match s.split_once(" + ") {
            Some((n, "ps")) => n.parse::<usize>().ok().map(|n| n + PS),
            _ => s.parse().ok(),
        },
    }
}

fn uint(b: &[u8], f: &Field) -> u64 {
    assert!(
        (1..=8).contains(&f.size),
        "field of size {} is not an integer",
        f.size
    );
    let mut a = [0u8; 8];
    a[..f.size].copy_from_slice(&b[f.offset..f.offset + f.size]);
    u64::from_le_bytes(a)
}

fn get<'t>(t: &'t BTreeMap<String, Field>, name: &str) -> &'t Field {
    t.get(name)
        .unwrap_or_else(|| panic!("field {name} not documented: {t:?}"))
}

fn fold(x: u64) -> u32 {
    (x ^ (x >> 32)) as u32
}

/// A database in `mode` with small and overflowing values, some removed, left open
/// (25 commits).
fn populated(mode: JournalMode) -> (SimVfs, Database) {
    let vfs = SimVfs::new();
    let db = Database::open(DB, sim_config(&vfs, mode, PS as u32).wal_autocheckpoint(0)).unwrap();
    for k in 0..24i64 {
        let mut w = db.begin_write().unwrap();
        let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
        w.insert(&t, k, &value_for(k, 1, [20, 300, 2500][k as usize % 3]))
            .unwrap();
        if k % 5 == 4 {
            w.remove(&t, k - 2).unwrap();
        }
        w.commit().unwrap();
    }
    // Long keys (the inline limit is 240 bytes at PS): leaf and separator cells with
    // key tail chains, inline and overflowing values.
    let mut w = db.begin_write().unwrap();
    let t = w.open_or_create_tree("long", KeyKind::Bytes).unwrap();
    for i in 0..12u8 {
        let mut k = vec![b'k'; 241 + 150 * i as usize];
        k.push(i);
        w.insert(
            &t,
            &k,
            &value_for(i64::from(i), 1, [0, 30, 900][i as usize % 3]),
        )
        .unwrap();
    }
    w.commit().unwrap();
    // Last, free some overflow chains, so the file ends with free pages.
    let mut w = db.begin_write().unwrap();
    let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
    for k in (17..24).filter(|k| k % 3 == 2) {
        w.remove(&t, k).unwrap();
    }
    w.commit().unwrap();
    (vfs, db)
}

fn file(vfs: &SimVfs, suffix: &str) -> Vec<u8> {
    vfs.read_file(Path::new(&format!("{DB}{suffix}")))
        .unwrap_or_else(|| panic!("no file {DB}{suffix}"))
}

/// The mode-code table: every registered mode is documented with the code the engine
/// stores at the documented offset, and the doc lists no other code.
#[test]
fn mode_codes_are_the_documented_ones() {
    let mut doc = BTreeMap::new();
    let start = DOC.find("| code | mode |").expect("mode-code table");
    for row in DOC[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        for pair in cols[1..].chunks(3) {
            if let [code, name, ..] = pair {
                if let Ok(code) = code.parse::<u8>() {
                    doc.insert(name.to_string(), code);
                }
            }
        }
    }
    let at = get(&table("### Page-0 file header"), "journal_mode").offset;
    for mode in JournalMode::all() {
        let vfs = SimVfs::new();
        drop(Database::open(DB, sim_config(&vfs, mode, PS as u32)).unwrap());
        let code = file(&vfs, "")[at];
        assert_eq!(doc.get(mode.name()), Some(&code), "mode {mode}");
    }
    // Codes from 200 up belong to test builds' modes (`toy`): documented whether or not
    // this build registers them.
    let test_only = doc
        .iter()
        .filter(|(name, code)| **code >= 200 && JournalMode::from_name(name).is_none())
        .count();
    assert_eq!(
        doc.len() - test_only,
        JournalMode::ALL.len(),
        "doc lists {doc:?}"
    );
}

/// The formats table: each row names a format by its first mode and lists exactly the
/// registered modes of that format (`JournalMode::same_format`), every mode in one row.
#[test]
fn formats_are_the_documented_ones() {
    let start = DOC
        .find("| format (its first mode's code) | modes |")
        .expect("formats table");
    let mut seen = Vec::new();
    for row in DOC[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
    {
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        let names = |c: &str| -> Vec<String> {
            c.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        };
        let first = JournalMode::from_name(&names(cols[1])[0]).expect("a mode");
        assert_eq!(first.format(), first, "{first} heads a format row");
        let modes = names(cols[2]);
        let want: Vec<String> = JournalMode::all()
            .filter(|m| m.same_format(first))
            .map(|m| m.name().to_string())
            .collect();
        let mut got = modes.clone();
        got.sort();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(got, want_sorted, "format {first}");
        seen.extend(modes);
    }
    let registered = JournalMode::all().filter(|m| m.code() < 200).count();
    assert_eq!(seen.len(), registered, "every mode in one row: {seen:?}");
}

/// Page-0 header table, both slots, against `Header::decode`.
#[test]
fn header_table_matches_page_0() {
    let t = table("### Page-0 file header");
    for mode in JournalMode::all() {
        let (vfs, db) = populated(mode);
        drop(db);
        let b = file(&vfs, "");
        // Two header slots exactly in the DHL layout; elsewhere bytes 128.. are no header.
        let slots = 1 + usize::from(decode_slot(&b, 1).is_ok());
        assert_eq!(
            slots == 2,
            matches!(mode.layout_name(), "dhl" | "ips" | "mvbt"),
            "{mode}: {slots} slots"
        );
        for slot in 0..slots {
            let s = &b[slot * 128..slot * 128 + 128];
            let h: Header = decode_slot(&b, slot).unwrap();
            let magic = get(&t, "magic");
            assert_eq!(
                &s[magic.offset..magic.offset + magic.size],
                b"inpage format 1\0"
            );
            assert_eq!(uint(s, get(&t, "version")), 2);
            assert_eq!(uint(s, get(&t, "page_size")), h.page_size as u64);
            assert_eq!(uint(s, get(&t, "page_count")), h.page_count as u64);
            assert_eq!(uint(s, get(&t, "fcc")), h.fcc);
            assert_eq!(uint(s, get(&t, "last_txn_size")), h.last_txn_size as u64);
            assert_eq!(uint(s, get(&t, "freelist_head")), h.freelist_head as u64);
            assert_eq!(uint(s, get(&t, "freelist_count")), h.freelist_count as u64);
            assert_eq!(uint(s, get(&t, "catalog_root")), h.catalog_root as u64);
            let meta = get(&t, "meta");
            assert_eq!(meta.size, 4 * h.meta.len());
            let crc = get(&t, "crc");
            assert_eq!(crc.offset + crc.size, 128);
            assert_eq!(uint(s, crc) as u32, crc32c::crc32c(&s[..crc.offset]));
            if mode == JournalMode::DELETE {
                assert!(h.freelist_count > 0, "the workload frees pages");
            }
        }
    }
}

/// Trailer, stock page header, stock overflow and free-list pages of a stock file.
#[test]
fn stock_pages_match_their_tables() {
    let (vfs, db) = populated(JournalMode::PERSIST);
    drop(db);
    let b = file(&vfs, "");
    let h = Header::decode(&b).unwrap();
    let tree = table("### Stock slotted tree page");
    let ovfl = table("### Stock overflow page");
    let free = table("### Free-list page (stock)");
    let mut seen = BTreeMap::new();
    for pgno in 0..h.page_count as usize {
        let p = &b[pgno * PS..(pgno + 1) * PS];
        let trailer = uint(p, get(&table("### Page trailer"), "crc")) as u32;
        assert_eq!(
            trailer,
            crc32c::crc32c_append(crc32c::crc32c(&(pgno as u32).to_le_bytes()), &p[..USABLE]),
            "trailer of page {pgno}"
        );
        if pgno == 0 {
            continue;
        }
        let ty = p[get(&tree, "type").offset];
        *seen.entry(ty).or_insert(0u32) += 1;
        match ty {
            1 | 2 => {
                let n = uint(p, get(&tree, "ncells")) as usize;
                let content = uint(p, get(&tree, "content")) as usize;
                let frag = uint(p, get(&tree, "frag")) as usize;
                let ptrs = get(&tree, "pointers").offset;
                assert!(ptrs + 2 * n <= content && content <= USABLE, "page {pgno}");
                let cells: usize = (0..n)
                    .map(|i| {
                        let off = u16::from_le_bytes([p[ptrs + 2 * i], p[ptrs + 2 * i + 1]]);
                        cell_len(ty == 1, &p[off as usize..])
                    })
                    .sum();
                assert_eq!(cells + frag, USABLE - content, "page {pgno}");
                if ty == 1 {
                    assert_eq!(uint(p, get(&tree, "right")), 0);
                }
            }
            3 => {
                assert!(uint(p, get(&ovfl, "next")) < h.page_count as u64);
                assert_eq!(get(&ovfl, "data").offset, 8);
            }
            4 => {
                assert!(uint(p, get(&free, "next")) < h.page_count as u64);
                assert!(p[8..USABLE].iter().all(|&x| x == 0), "free page {pgno}");
            }
            t => panic!("page {pgno} has undocumented type {t}"),
        }
    }
    assert_eq!(
        seen.get(&4).copied().unwrap_or(0),
        h.freelist_count,
        "{seen:?}"
    );
    assert!(seen.contains_key(&3) && seen.contains_key(&4), "{seen:?}");
}

/// Size of the stock cell at the start of `c` (the documented inline and long-key rules
/// at `PS`, the long-key fields read at their documented offsets).
fn cell_len(leaf: bool, c: &[u8]) -> usize {
    let max_cell = (USABLE - 12) / 4 - 2;
    let max_key_len = max_cell - 10;
    let prefix = max_key_len / 8;
    let long = table("Long-key cell (`klen > max_key_len`), leaf or interior:");
    let marker = get(&long, "klen_long");
    assert_eq!((marker.offset, marker.size), (0, 2));
    let klen16 = uint(c, marker) as usize;
    let key_local = if klen16 == 0xFFFF {
        let klen = uint(c, get(&long, "long_klen")) as usize;
        assert!(klen > max_key_len, "a long key of an inline length");
        8 + prefix
    } else {
        assert!(klen16 <= max_key_len);
        klen16
    };
    let vlen = u32::from_le_bytes(c[2..6].try_into().unwrap()) as usize;
    match leaf {
        true if 6 + key_local + vlen <= max_cell => 6 + key_local + vlen,
        true => 6 + key_local + 4,
        false => 6 + key_local,
    }
}

/// DHL descriptors and overflow pages: fields at the documented offsets, and the
/// documented checksum recomputed for every version.
#[test]
fn dhl_pages_match_their_tables() {
    let (vfs, db) = populated(JournalMode::DHL_CC);
    drop(db);
    let b = file(&vfs, "");
    let desc = table("Descriptor (32 bytes, at `32 · slot`):");
    let ovfl = table("### DHL overflow page");
    let crc_at = get(&desc, "checksum").offset;
    let (mut versions, mut overflows) = (0, 0);
    for pgno in 1..b.len() / PS {
        let p = &b[pgno * PS..(pgno + 1) * PS];
        for slot in 0..2 {
            let d = &p[slot * 32..slot * 32 + 32];
            if uint(d, get(&desc, "tid")) == 0 {
                continue;
            }
            let ty = d[get(&desc, "type").offset];
            let stored = uint(d, get(&desc, "checksum")) as u32;
            if ty == 3 {
                assert_eq!(slot, 0, "overflow descriptor in slot 1 of page {pgno}");
                let len = uint(p, get(&ovfl, "len")) as usize;
                let data = get(&ovfl, "data").offset;
                let mut covered = p[..crc_at].to_vec();
                covered.extend_from_slice(&p[data..data + len]);
                assert_eq!(
                    stored,
                    fold(xxhash_rust::xxh3::xxh3_64_with_seed(&covered, pgno as u64)),
                    "page {pgno}"
                );
                overflows += 1;
                continue;
            }
            let n = uint(d, get(&desc, "ncells")) as usize;
            let array = uint(d, get(&desc, "array_off")) as usize;
            let mut covered = d[..crc_at].to_vec();
            covered.extend_from_slice(&p[array..array + 2 * n]);
            for i in 0..n {
                let off = u16::from_le_bytes([p[array + 2 * i], p[array + 2 * i + 1]]) as usize;
                covered.extend_from_slice(&p[off..off + cell_len(ty == 1, &p[off..])]);
            }
            assert_eq!(
                stored,
                fold(xxhash_rust::xxh3::xxh3_64_with_seed(&covered, pgno as u64)),
                "page {pgno}"
            );
            assert!(
                uint(d, get(&desc, "txn_size")) > 0,
                "unstamped version on page {pgno}"
            );
            versions += 1;
        }
    }
    assert!(
        versions > 0 && overflows > 0,
        "{versions} versions, {overflows} overflow pages"
    );
}

/// The free-space snapshot a clean close of a DHL file keeps: the `snap_*` header fields,
/// the chain pages' table and the documented crc, against the free pages the integrity
/// check counts.
#[test]
fn dhl_free_space_snapshot_matches_its_table() {
    let (vfs, db) = populated(JournalMode::DHL_CC);
    let free = {
        let r = db.begin_read().unwrap();
        inpage::check::check(&r, &Default::default())
            .unwrap()
            .free_pages as u64
    };
    assert!(free > 0, "the workload frees pages");
    db.close().unwrap();
    let b = file(&vfs, "");
    let t = table("### Page-0 file header");
    let snap = table("### DHL free-space snapshot page");
    let marked = (0..2)
        .find(|&s| uint(&b[s * 128..], get(&t, "clean_mark")) != 0)
        .expect("a clean close marks a slot");
    let s = &b[marked * 128..marked * 128 + 128];
    let fcc = uint(s, get(&t, "clean_mark"));
    let head = uint(s, get(&t, "snap_head"));
    let pages = uint(s, get(&t, "snap_pages"));
    assert_eq!(uint(s, get(&t, "snap_count")), free + 1);
    let mut crc = crc32c::crc32c(
        &[
            &fcc.to_le_bytes()[..],
            &(head as u32).to_le_bytes(),
            &(pages as u32).to_le_bytes(),
            &(free as u32).to_le_bytes(),
        ]
        .concat(),
    );
    let (mut listed, mut next) = (Vec::new(), head as usize);
    for _ in 0..pages {
        let p = &b[next * PS..(next + 1) * PS];
        let d = get(&snap, "descriptors");
        assert!(p[d.offset..d.offset + d.size].iter().all(|&x| x == 0));
        assert_eq!(uint(p, get(&snap, "magic")), 0x5053_5246);
        let n = uint(p, get(&snap, "entries")) as usize;
        assert!(n <= (USABLE - 76) / 4);
        let at = get(&snap, "pages").offset;
        listed.extend(
            (0..n).map(|i| u32::from_le_bytes(p[at + 4 * i..at + 4 * i + 4].try_into().unwrap())),
        );
        crc = crc32c::crc32c_append(crc, &p[64..]);
        next = uint(p, get(&snap, "next")) as usize;
    }
    assert_eq!(next, 0, "the chain ends after snap_pages pages");
    assert_eq!(listed.len() as u64, free);
    assert!(listed.windows(2).all(|w| w[0] < w[1]), "{listed:?}");
    assert!(
        listed.contains(&(head as u32)),
        "chain pages are listed free"
    );
    assert_eq!(uint(s, get(&t, "snap_crc")) as u32, crc);
}

/// WAL header and frames of an open `wal` database (no checkpoint yet).
#[test]
fn wal_matches_its_tables() {
    let (vfs, db) = populated(JournalMode::WAL);
    let w = file(&vfs, "-wal");
    drop(db);
    let hdr = table("Header (32 bytes at offset 0):");
    let frame = table("Frames from offset 32, frame `i` at `32 + i·(24 + ps)`:");
    let magic = get(&hdr, "magic");
    assert_eq!(&w[magic.offset..magic.offset + magic.size], b"inpgWAL\0");
    assert_eq!(uint(&w, get(&hdr, "page_size")), PS as u64);
    let crc = get(&hdr, "crc");
    let hcrc = uint(&w, crc) as u32;
    assert_eq!(hcrc, crc32c::crc32c(&w[..crc.offset]));
    let image = get(&frame, "image").offset;
    let chain_at = get(&frame, "chain");
    let mut chain = hcrc;
    let (mut at, mut commits, mut last_tid) = (32, 0, 0);
    let mut commits_with_page0 = 0;
    while at + image + PS <= w.len() {
        let f = &w[at..at + image + PS];
        assert_eq!(uint(f, get(&frame, "salt1")), uint(&w, get(&hdr, "salt1")));
        assert_eq!(uint(f, get(&frame, "salt2")), uint(&w, get(&hdr, "salt2")));
        let mut tag = f[..chain_at.offset].to_vec();
        tag.extend_from_slice(&f[chain_at.offset + 4..image]);
        let want = fold(xxhash_rust::xxh3::xxh3_64_with_seed(
            &[&tag[..], &f[image..]].concat(),
            chain as u64,
        ));
        assert_eq!(uint(f, chain_at) as u32, want, "frame at {at}");
        chain = want;
        let tid = uint(f, get(&frame, "tid"));
        assert!(
            tid == last_tid || tid == last_tid + 1,
            "tid {tid} after {last_tid}"
        );
        let pgno = uint(f, get(&frame, "pgno"));
        if at == 32 {
            assert_eq!(pgno, 0, "a generation's first frame is page 0");
        }
        if pgno == 0 {
            // Page 0's header names this commit, or (logged by the generation's first
            // commit without a header change) the one before it.
            let fcc = Header::decode(&f[image..]).unwrap().fcc as u32;
            assert!(
                fcc == tid as u32 || (at == 32 && fcc.wrapping_add(1) == tid as u32),
                "page 0 frame with fcc {fcc} in commit {tid}"
            );
        }
        if tid != last_tid && pgno == 0 {
            commits_with_page0 += 1;
        }
        last_tid = tid;
        if uint(f, get(&frame, "db_size")) != 0 {
            commits += 1;
        }
        at += image + PS;
    }
    assert_eq!(commits, 26, "one commit frame per transaction");
    assert!(
        commits_with_page0 < commits,
        "commits that change only the counter leave page 0 out ({commits_with_page0} of {commits} have it)"
    );
}

/// A hot rollback journal (power cut right after the journal is written and synced):
/// header and records at the documented offsets, record checksums keyed by the nonce.
#[test]
fn rollback_journal_matches_its_tables() {
    let (vfs, db) = populated(JournalMode::PERSIST);
    let before = Header::decode(&file(&vfs, "")).unwrap();
    // Records, header, fdatasync: the database write after them is refused.
    vfs.set_power_cut_after(3);
    let mut w = db.begin_write().unwrap();
    let t = w.open_or_create_tree("t", KeyKind::Int).unwrap();
    w.insert(&t, 100i64, &value_for(100, 1, 40)).unwrap();
    assert!(w.commit().is_err(), "the cut must stop the commit");
    let j = file(&vfs, "-journal");
    drop(db);
    let hdr = table("Header, sector 0 (512 bytes):");
    let rec = table("Records from offset 512, record `i` at `512 + i·(ps + 8)`:");
    let magic = get(&hdr, "magic");
    assert_eq!(&j[magic.offset..magic.offset + magic.size], b"inpgJRNL");
    assert_eq!(uint(&j, get(&hdr, "page_size")), PS as u64);
    assert_eq!(
        uint(&j, get(&hdr, "old_page_count")),
        before.page_count as u64
    );
    assert_eq!(uint(&j, get(&hdr, "tid")), before.fcc + 1);
    let crc = get(&hdr, "crc");
    assert_eq!(uint(&j, crc) as u32, crc32c::crc32c(&j[..crc.offset]));
    let nonce = uint(&j, get(&hdr, "nonce"));
    let nrec = uint(&j, get(&hdr, "nrec")) as usize;
    assert!(nrec >= 2, "page 0 and the leaf: {nrec}");
    let image = get(&rec, "image").offset;
    let db_now = file(&vfs, "");
    let mut last = None;
    for i in 0..nrec {
        let r = &j[512 + i * (PS + 8)..512 + (i + 1) * (PS + 8)];
        let pgno = uint(r, get(&rec, "pgno"));
        assert!(
            last.is_none_or(|l| pgno > l) && (i > 0 || pgno == 0),
            "order: {pgno}"
        );
        last = Some(pgno);
        let img = &r[image..image + PS];
        // The database was not written, so each record is the page's current image.
        let p = pgno as usize * PS;
        assert_eq!(img, &db_now[p..p + PS], "record {i} (page {pgno})");
        let mut h = xxhash_rust::xxh3::Xxh3::with_seed(nonce);
        h.update(&(pgno as u32).to_le_bytes());
        h.update(img);
        assert_eq!(
            uint(r, get(&rec, "checksum")) as u32,
            fold(h.digest()),
            "record {i}"
        );
    }
}

use inpage_bench::contender::{select, EngineStore};
use inpage_bench::recovery::{calibrate_writes, StopPlan, StopVfs};
use inpage_bench::workload::{mobibench_value, Op};
use std::sync::Arc;
#[test]
fn dash_calib() {
    let c = select(&["dash".to_string()]).unwrap().remove(0);
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("t");
    std::fs::create_dir(&dir).unwrap();
    let v = mobibench_value(100, false);
    {
        let mut st = c
            .open(&dir, &Arc::new(inpage::vfs::IoStats::new()))
            .unwrap();
        let keys: Vec<i64> = (1..=1200).collect();
        st.txn(Op::Insert, &keys, &v).unwrap();
        st.close().unwrap();
    }
    let keys: Vec<i64> = (1201..1201 + 128).collect();
    let a = calibrate_writes(&c, &dir, &d.path().join("s1"), &keys, &v, &[]).unwrap();
    eprintln!("calib {} writes", a.len());
    c.open(&dir, &Arc::new(inpage::vfs::IoStats::new()))
        .unwrap()
        .close()
        .unwrap();
    let plan = StopPlan::new(None, Box::new(|_| std::io::Error::other("x")));
    let vfs = Arc::new(StopVfs::new(
        Arc::new(inpage::vfs::OsVfs::new()),
        plan.clone(),
    ));
    let store = EngineStore::open(&dir, inpage::JournalMode::DASH, None, vfs).unwrap();
    let w = store.begin_insert(&keys, &v).unwrap();
    plan.arm();
    w.commit().unwrap();
    eprintln!("orig {} writes", plan.writes());
}

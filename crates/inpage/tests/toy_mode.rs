//! The `toy` mode of `docs/ADDING-A-MODE.md` is in the registry exactly when the
//! `toy-mode` feature is on: the test matrices that `scripts/test.sh` runs a second time
//! with the feature then have one more mode to cover, and a release build has none of it.

use inpage::JournalMode;

#[test]
fn the_toy_mode_is_registered_exactly_with_its_feature() {
    let toy = JournalMode::from_name("toy");
    assert_eq!(toy.is_some(), cfg!(feature = "toy-mode"));
    if let Some(m) = toy {
        assert!(JournalMode::all().any(|x| x == m));
        assert!(!m.promises_atomicity());
    }
}

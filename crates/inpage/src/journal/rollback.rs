//! STUB — replaced by the journal helper.
#[derive(Debug)]
pub(crate) struct RollbackJournal;
pub(crate) fn recover_hot_journal() {}

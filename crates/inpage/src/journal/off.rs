//! STUB — replaced by the journal helper.
#[derive(Debug)]
pub(crate) struct OffJournal;

//! STUB — replaced by the journal helper.
use super::*;
#[derive(Debug)]
pub(crate) struct OffJournal;
impl OffJournal {
    pub(crate) fn open(_ctx: JournalCtx) -> Result<(OffJournal, RecoveryReport)> {
        todo!()
    }
}
impl Journal for OffJournal {
    fn mode(&self) -> JournalMode { todo!() }
    fn read_page(&self, _pgno: Pgno, _buf: &mut [u8]) -> Result<()> { todo!() }
    fn commit(&self, _batch: &CommitBatch<'_>) -> Result<()> { todo!() }
    fn checkpoint(&self) -> Result<()> { todo!() }
    fn close(&self) -> Result<()> { todo!() }
}

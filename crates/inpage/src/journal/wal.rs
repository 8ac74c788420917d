//! STUB — replaced by the journal helper.
use super::*;
#[derive(Debug)]
pub(crate) struct Wal;
impl Wal {
    pub(crate) fn open(_ctx: JournalCtx) -> Result<(Wal, RecoveryReport)> {
        todo!()
    }
}
impl Journal for Wal {
    fn mode(&self) -> JournalMode { todo!() }
    fn read_page(&self, _pgno: Pgno, _buf: &mut [u8]) -> Result<()> { todo!() }
    fn commit(&self, _batch: &CommitBatch<'_>) -> Result<()> { todo!() }
    fn checkpoint(&self) -> Result<()> { todo!() }
    fn close(&self) -> Result<()> { todo!() }
}

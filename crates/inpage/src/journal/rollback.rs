//! STUB — replaced by the journal helper.
use super::*;
use crate::vfs::File;
#[derive(Debug)]
pub(crate) struct RollbackJournal;
impl RollbackJournal {
    pub(crate) fn open(_ctx: JournalCtx, _mode: JournalMode) -> Result<(RollbackJournal, RecoveryReport)> {
        todo!()
    }
}
pub(crate) fn recover_hot_journal(_vfs: &Arc<dyn Vfs>, _db_path: &Path, _db_file: &Arc<dyn File>) -> Result<Option<RecoveryReport>> { todo!() }
impl Journal for RollbackJournal {
    fn mode(&self) -> JournalMode { todo!() }
    fn read_page(&self, _pgno: Pgno, _buf: &mut [u8]) -> Result<()> { todo!() }
    fn commit(&self, _batch: &CommitBatch<'_>) -> Result<()> { todo!() }
    fn checkpoint(&self) -> Result<()> { todo!() }
    fn close(&self) -> Result<()> { todo!() }
}

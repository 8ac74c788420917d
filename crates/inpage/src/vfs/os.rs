//! STUB — replaced by the VFS helper.
use super::*;
/// Real files through the OS.
#[derive(Debug, Default, Clone)]
pub struct OsVfs;
impl OsVfs {
    pub fn new() -> OsVfs {
        OsVfs
    }
}
impl Vfs for OsVfs {
    fn open(&self, _path: &Path, _opts: OpenOptions) -> io::Result<Arc<dyn File>> {
        todo!()
    }
    fn delete(&self, _path: &Path) -> io::Result<()> {
        todo!()
    }
    fn exists(&self, _path: &Path) -> io::Result<bool> {
        todo!()
    }
    fn rename(&self, _from: &Path, _to: &Path) -> io::Result<()> {
        todo!()
    }
    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        todo!()
    }
}

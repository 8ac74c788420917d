/*
** glue.c — SQLite's storage layer (btree.c, pager.c, backup.c) replaced by inpage.
** build.rs splices this file into the amalgamation where btree.c was, so it sees every
** declaration btree.c saw (SQLITE_PRIVATE is static). Storage calls go to the Rust side
** of this crate (src/ffi.rs, the ipg_* functions), which uses inpage's public API.
**
** Invariants, and why they hold:
** - A Btree owns one inpage connection (Conn); a BtCursor owns one Rust cursor (Cur)
**   that names its entry by key, never by slot, so writes through other cursors can
**   never make it read a wrong entry (src/ffi.rs).
** - SQLite's savepoint levels map 1:1 onto inpage savepoints. SQLite opens them lazily
**   (SAVEPOINT only bumps db->nSavepoint), so every write BeginTrans brings the count
**   up to db->nSavepoint, as the pager did (trap 1, SQLPLAN §2a).
** - Functions SQLite may call with a NULL Btree* (slots never opened: temp) return
**   at once (trap 3).
** - The journal mode is a property of the file: PRAGMA journal_mode reports the mode in
**   use (codes 6-9 are inpage's, named by build.rs's pragma.c patch). A request for
**   another mode is met while the database is still empty (ipg_set_mode recreates it)
**   and otherwise refused by answering the mode in use, SQLite's convention.
*/
#include <stdlib.h>

typedef struct Conn Conn;
typedef struct Cur Cur;
extern int ipg_open(const char*, int, const char*, int, Conn**);
extern void ipg_close(Conn*);
extern int ipg_txn_state(Conn*);
extern int ipg_begin(Conn*, int, int);
extern int ipg_end(Conn*, int, int);
extern int ipg_sp_open(Conn*, int);
extern int ipg_sp(Conn*, int, int);
extern u32 ipg_meta_get(Conn*, int);
extern int ipg_meta_set(Conn*, int, u32);
extern int ipg_create(Conn*, int, u32*);
extern int ipg_clear(Conn*, u32, i64*, int);
/* A forward scan's row run (ffi.rs `Run`): the rest of the engine cursor's leaf, so
** Next, IntegerKey, PayloadFetch and CursorHasMoved within it stay in C. Rust moves
** the engine cursor to rows[i] on its next call; ipg_sync ends the run, which must
** happen before the connection's transaction begins or ends, and, in a write
** transaction, before anything changes the run's table (glueEndTableRuns). */
typedef struct IpgRow { i64 key; const u8 *pay; u32 n; } IpgRow;
typedef struct IpgRun { const IpgRow *rows; u32 n; u32 i; const u8 *pay; u32 nPay; u32 nTotal; u64 pos; } IpgRun;
extern void ipg_sync(Cur*);
extern Cur *ipg_cursor_open(Conn*, u32, void*, int, IpgRun**);
extern void ipg_cursor_close(Cur*);
extern int ipg_first(Cur*, int, int*);
extern int ipg_seek_int(Cur*, i64, int*);
extern int ipg_seek_probe(Cur*, void*, int*);
extern int ipg_step(Cur*, int);
extern int ipg_valid(Cur*);
extern void ipg_invalidate(Cur*);
extern int ipg_has_moved(Cur*);
extern int ipg_payload(Cur*, const u8**, u32*, u32*);
extern int ipg_payload_range(Cur*, u32, u32, u8*);
extern i64 ipg_intkey(Cur*);
extern int ipg_insert(Cur*, i64, const u8*, int, int);
extern int ipg_insert_index(Cur*, const u8*, int, void*);
extern int ipg_delete(Cur*, int);
extern int ipg_restore(Cur*, int*);
extern int ipg_count(Cur*, i64*);
extern int ipg_table_count(Conn*, u32, i64*);
extern int ipg_check(Conn*, const char**, int*);
extern int ipg_page_size(Conn*);
extern u32 ipg_page_count(Conn*);
extern int ipg_mode_code(Conn*);
extern int ipg_set_mode(Conn*, int);
extern int ipg_set_page_size(Conn*, int);
extern int ipg_set_log_limits(Conn*, i64, int);
extern int ipg_put_data(Cur*, u32, const void*, int);
extern int ipg_copy(Conn*, Conn*);
extern int ipg_vacuum_self(Conn*);
extern int ipg_auto_vacuum_get(Conn*);
extern int ipg_auto_vacuum_set(Conn*, int);
extern int ipg_auto_vacuum_vacuum(Conn*, int);
extern int ipg_incr_vacuum(Conn*);
typedef struct Backup Backup;
extern Backup *ipg_backup_new(void);
extern void ipg_backup_free(Backup*);
extern int ipg_backup_step(Backup*, Conn*, Conn*, int, int*, int*);
extern int ipg_serialize(Conn*, const u8**, i64*);
extern int ipg_deserialize(Conn*, const u8*, i64, int);
extern int ipg_checkpoint(Conn*, int, int*, int*);
extern int ipg_read_only(Conn*);
extern int ipg_commit_group(Conn**, int, int);
extern u32 ipg_data_version(Conn*);
extern const char *ipg_open_errmsg(void);
extern const char *ipg_errmsg(Conn*);

/* Callbacks for the Rust side: SQLite's record comparator. */
/* The comparator for a probe, chosen once per engine call as sqlite3BtreeIndexMoveto
** chooses it once per seek (the choice depends only on the probe, which does not change
** during the call). */
void *ipg_c_find_compare(void *probe){
  return (void*)sqlite3VdbeFindCompare((UnpackedRecord*)probe);
}
/* Compare two stored records. *pFailed = 1 if no answer could be computed (out of
** memory, or a corrupt record): the caller must not use the result, since treating it
** as "equal" would let an insert replace an unrelated entry. */
int ipg_c_cmp_records(void *ki, int nOrder, int n1, const void *k1, int n2, const void *k2, int *pFailed){
  UnpackedRecord *p = sqlite3VdbeAllocUnpackedRecord((KeyInfo*)ki);
  int c;
  *pFailed = 0;
  if( !p ){ *pFailed = 1; return 0; }
  sqlite3VdbeRecordUnpack(n2, k2, p);
  /* Only the fields inserts place entries by (ipgOrderFields): a stale separator equal
  ** on them must compare Equal here too, as it did for the insert's probe. */
  if( nOrder>0 && nOrder<p->nField ) p->nField = (u16)nOrder;
  p->default_rc = 0; p->errCode = 0;
  c = sqlite3VdbeRecordCompare(n1, k1, p);
  if( p->errCode ) *pFailed = 1;
  sqlite3DbFree(((KeyInfo*)ki)->db, p);
  return c;
}
/* The Rust side holds a reference on a KeyInfo for as long as an index tree's order
** may be asked for (the engine's cursor keeps the order). */
void ipg_c_keyinfo_ref(void *ki){ (void)sqlite3KeyInfoRef((KeyInfo*)ki); }
void ipg_c_keyinfo_unref(void *ki){ sqlite3KeyInfoUnref((KeyInfo*)ki); }

/* What SQLite's pager kept and the pragmas still ask for: the journal size limit and
** the locking mode are remembered and answered (the engine has its own log limits and
** one lock per file), so PRAGMA journal_size_limit / locking_mode read back as stock. */
struct Pager { int eMode; sqlite3_vfs *pVfs; Btree *pBt; i64 journalSizeLimit; int eLock; int nAutoCkpt; };

struct BtCursor {
  u8 eState;            /* 1 = the static fake valid cursor; otherwise unused */
  u8 wrFlag;
  u8 fault; int faultCode;
  Btree *pBtree;
  KeyInfo *pKeyInfo;
  Cur *pCur;
  IpgRun *run;          /* the row run, owned by pCur (never NULL while pCur is open) */
  BtCursor *pNext;
  int iTable;
  u8 *staged; int nStaged;     /* TransferRow → PREFORMAT insert */
};

struct Btree {
  sqlite3 *db;
  Conn *pConn;
  BtCursor *pCursor;
  void *pSchema; void (*xFreeSchema)(void*);
  struct Pager pager;
  char *zFilename;      /* in SQLite's filename layout (glueFilename); free glueFreeFilename */
  int isMem;
  int nBackup;          /* backups in progress that use this b-tree (source or destination) */
};

/* The database's name in the layout stock SQLite's pager gives it, which
** sqlite3_db_filename() callers and sqlite3_uri_parameter(), sqlite3_filename_journal()
** and kin walk: four zero bytes, the path, NUL, the URI parameters of zIn (key NUL value
** NUL ..., then NUL), the journal path, NUL, the WAL path, NUL, and three NULs more. The
** pointer returned is the path's start. */
static char *glueFilename(const char *zPath, const char *zIn){
  size_t nPath = strlen(zPath), nUri = 1, nIn;
  char *z, *p;
  if( zIn && zIn[0] ){
    const char *q;
    nIn = strlen(zIn);
    q = zIn + nIn + 1;
    while( *q ){ q += strlen(q) + 1; q += strlen(q) + 1; }
    nUri = (size_t)(q - (zIn + nIn + 1)) + 1;
  }
  z = sqlite3_malloc64(4 + nPath + 1 + nUri + nPath + 9 + nPath + 5 + 3);
  if( !z ) return 0;
  memset(z, 0, 4 + nPath + 1 + nUri + nPath + 9 + nPath + 5 + 3);
  p = z + 4;
  memcpy(p, zPath, nPath); p += nPath + 1;
  if( nUri>1 ) memcpy(p, zIn + strlen(zIn) + 1, nUri - 1);
  p += nUri;
  if( nPath ){
    memcpy(p, zPath, nPath); memcpy(p + nPath, "-journal", 8); p += nPath + 9;
    memcpy(p, zPath, nPath); memcpy(p + nPath, "-wal", 4);
  }
  return z + 4;
}
static void glueFreeFilename(char *z){ if( z ) sqlite3_free(z - 4); }

SQLITE_PRIVATE int sqlite3BtreeOpen(sqlite3_vfs *pVfs, const char *zFilename, sqlite3 *db,
                                    Btree **ppBtree, int flags, int vfsFlags){
  Btree *p; int rc; char zFull[4096];
  int isMem = zFilename==0 || zFilename[0]==0 || strcmp(zFilename, ":memory:")==0
           || (flags & BTREE_MEMORY) || (vfsFlags & SQLITE_OPEN_MEMORY);
  p = sqlite3_malloc64(sizeof(Btree));
  if( !p ) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  p->db = db; p->pager.pVfs = pVfs; p->pager.pBt = p; p->isMem = isMem;
  p->pager.journalSizeLimit = SQLITE_DEFAULT_JOURNAL_SIZE_LIMIT;
  p->pager.nAutoCkpt = -1;  /* the engine's default until the connection's hook says */
  p->pager.eLock = PAGER_LOCKINGMODE_NORMAL;
  if( !isMem && sqlite3OsFullPathname(pVfs, zFilename, sizeof(zFull), zFull)==SQLITE_OK ){
    p->zFilename = glueFilename(zFull, zFilename);
  }else{
    p->zFilename = glueFilename(isMem ? "" : zFilename, isMem ? 0 : zFilename);
  }
  if( !p->zFilename ){ sqlite3_free(p); return SQLITE_NOMEM; }
  /* file:app.db?journal_mode=wal: the journal mode of a new file (INPAGE_JOURNAL_MODE,
  ** the deployment switch, takes precedence; an existing file keeps its own). */
  /* ipg_open's flags (ffi.rs OPEN_*): read-only, create. */
  rc = ipg_open(p->zFilename, isMem,
                isMem ? 0 : sqlite3_uri_parameter(zFilename, "journal_mode"),
                ((vfsFlags & SQLITE_OPEN_READONLY) ? 1 : 0) | ((vfsFlags & SQLITE_OPEN_CREATE) ? 2 : 0),
                &p->pConn);
  if( rc ){
    /* openDatabase() replaces the message by the code's generic one: log the reason. */
    sqlite3_log(rc, "inpage: cannot open %s: %s", p->zFilename, ipg_open_errmsg()); glueFreeFilename(p->zFilename); sqlite3_free(p); return rc; }
  *ppBtree = p;
  return SQLITE_OK;
}
SQLITE_PRIVATE int sqlite3BtreeCloseCursor(BtCursor*);
SQLITE_PRIVATE int sqlite3BtreeClose(Btree *p){
  while( p->pCursor ) sqlite3BtreeCloseCursor(p->pCursor);
  if( p->pSchema ){ if( p->xFreeSchema ) p->xFreeSchema(p->pSchema); sqlite3DbFree(0, p->pSchema); }
  ipg_end(p->pConn, 0, 0);
  ipg_close(p->pConn);
  glueFreeFilename(p->zFilename);
  sqlite3_free(p);
  return SQLITE_OK;
}
/* Row runs hold a table's rows as the cursor last read them: none may outlive a change
** of transaction, nor a change of its table within one. Only this connection writes
** while it holds the write transaction; every statement's start ends all runs
** (sqlite3BtreeBeginTrans), a write through a cursor ends that cursor's own (ffi.rs
** `cur`), and every write also ends the runs of the other cursors on the table it
** changes first (all of them for a savepoint rollback). SQLite itself does not scan a
** table with one cursor while a statement writes it through another (it collects the
** rows first), so that last rule is a guard: a run's rows are the table's for as long as
** C steps through them, whatever a statement does. */
static void glueEndRuns(Btree *p){
  BtCursor *c;
  for(c=p->pCursor; c; c=c->pNext) if( c->run && c->run->n ) ipg_sync(c->pCur);
}
static void glueEndTableRuns(Btree *p, int iTable){
  BtCursor *c;
  for(c=p->pCursor; c; c=c->pNext){
    if( c->iTable==iTable && c->run && c->run->n ) ipg_sync(c->pCur);
  }
}
SQLITE_PRIVATE int sqlite3BtreeBeginTrans(Btree *p, int wrflag, int *pSchemaVersion){
  int rc;
  /* Another connection's or process's turn: with busy_timeout set (db->busyTimeout, only
  ** while sqlite3_busy_timeout's own handler is installed) the engine waits that long
  ** itself, short sleeps that let it say it waits and so get its turn; otherwise the
  ** app's busy handler decides, as in btree.c, and only when this connection holds no
  ** transaction. A read transaction's upgrade waits too (for other processes' readers,
  ** as stock SQLite's COMMIT does), and fails at once while another writer holds the
  ** database, as stock's does. */
  int fresh = ipg_txn_state(p->pConn)==SQLITE_TXN_NONE;
  int waitMs = p->db->busyTimeout;
  glueEndRuns(p);
  do{
    rc = ipg_begin(p->pConn, wrflag, waitMs);
  }while( rc==SQLITE_BUSY && fresh && waitMs<=0
          && sqlite3InvokeBusyHandler(&p->db->busyHandler) );
  /* Savepoints are opened lazily: bring the count up to db->nSavepoint. */
  if( rc==SQLITE_OK && wrflag ) rc = ipg_sp_open(p->pConn, p->db->nSavepoint);
  if( rc==SQLITE_OK && pSchemaVersion ) *pSchemaVersion = (int)ipg_meta_get(p->pConn, 1);
  return rc;
}
SQLITE_PRIVATE int sqlite3BtreeBeginStmt(Btree *p, int iStatement){ return ipg_sp_open(p->pConn, iStatement); }
static void glueTrip(Btree *p, int errCode, int writeOnly){
  BtCursor *c;
  for(c=p->pCursor; c; c=c->pNext){
    if( writeOnly && !c->wrFlag ) continue;   /* read cursors re-seek by key anyway */
    c->fault = 1; c->faultCode = errCode;
  }
}
SQLITE_PRIVATE int sqlite3BtreeSavepoint(Btree *p, int op, int iSavepoint){
  if( !p ) return SQLITE_OK;
  if( op==SAVEPOINT_ROLLBACK ) glueEndRuns(p);
  return ipg_sp(p->pConn, op==SAVEPOINT_RELEASE ? 1 : 2, iSavepoint);
}
static int glueEnd(Btree *p, int commit){
  glueEndRuns(p);
  return ipg_end(p->pConn, commit, p->db->nVdbeRead>1);
}
SQLITE_PRIVATE int sqlite3BtreeCommitPhaseOne(Btree *p, const char *z){ (void)p; (void)z; return SQLITE_OK; }
/* vdbeCommit's phase one (build.rs patches the call in): a transaction that wrote
** several databases (ATTACH) commits them all at once, atomically, through the engine's
** super-journal (ffi.rs ipg_commit_group, `inpage::commit_all`); phase two then finds
** nothing left to commit. A transaction that wrote one database commits in phase two,
** as before. A database that cannot take part (its journal mode keeps commits outside
** its files until a later flush) fails the commit with the reason, and the VDBE rolls
** the transaction back. */
SQLITE_PRIVATE int sqlite3GlueCommitPhaseOneAll(sqlite3 *db, Vdbe *pVdbe){
  Conn *a[SQLITE_MAX_ATTACHED+2];
  Btree *w[SQLITE_MAX_ATTACHED+2];
  int i, n = 0, rc;
  for(i=0; i<db->nDb && n<(int)ArraySize(a); i++){
    Btree *p = db->aDb[i].pBt;
    if( p && ipg_txn_state(p->pConn)==SQLITE_TXN_WRITE ){ w[n] = p; a[n++] = p->pConn; }
  }
  if( n<2 ) return SQLITE_OK;
  for(i=0; i<n; i++) glueEndRuns(w[i]);
  rc = ipg_commit_group(a, n, db->nVdbeRead>1);
  if( rc!=SQLITE_OK ){
    for(i=0; i<n; i++){
      const char *z = ipg_errmsg(a[i]);
      if( z && z[0] ){ sqlite3VdbeError(pVdbe, "%s", z); break; }
    }
  }
  return rc;
}
SQLITE_PRIVATE int sqlite3BtreeCommitPhaseTwo(Btree *p, int bCleanup){
  (void)bCleanup;
  if( ipg_txn_state(p->pConn)==SQLITE_TXN_NONE ) return SQLITE_OK;
  return glueEnd(p, 1);
}
SQLITE_PRIVATE int sqlite3BtreeCommit(Btree *p){ return sqlite3BtreeCommitPhaseTwo(p, 0); }
SQLITE_PRIVATE int sqlite3BtreeRollback(Btree *p, int tripCode, int writeOnly){
  if( tripCode!=SQLITE_OK ) glueTrip(p, tripCode, writeOnly);
  glueEnd(p, 0);
  return SQLITE_OK;
}
SQLITE_PRIVATE int sqlite3BtreeTxnState(Btree *p){ return p ? ipg_txn_state(p->pConn) : SQLITE_TXN_NONE; }
SQLITE_PRIVATE int sqlite3BtreeCreateTable(Btree *p, Pgno *piTable, int flags){
  u32 n = 0; int rc = ipg_create(p->pConn, (flags & BTREE_INTKEY)!=0, &n);
  *piTable = (Pgno)n;
  return rc;
}
SQLITE_PRIVATE int sqlite3BtreeClearTable(Btree *p, int iTable, i64 *pnChange){
  BtCursor *c;
  glueEndTableRuns(p, iTable);
  for(c=p->pCursor; c; c=c->pNext) if( c->iTable==iTable ) ipg_invalidate(c->pCur);
  return ipg_clear(p->pConn, (u32)iTable, pnChange, 0);
}
SQLITE_PRIVATE int sqlite3BtreeClearTableOfCursor(BtCursor *c){ return sqlite3BtreeClearTable(c->pBtree, c->iTable, 0); }
SQLITE_PRIVATE int sqlite3BtreeDropTable(Btree *p, int iTable, int *piMoved){
  *piMoved = 0;
  glueEndTableRuns(p, iTable);
  return ipg_clear(p->pConn, (u32)iTable, 0, 1);
}
SQLITE_PRIVATE int sqlite3BtreeTripAllCursors(Btree *p, int errCode, int writeOnly){ if( p ) glueTrip(p, errCode, writeOnly); return SQLITE_OK; }
SQLITE_PRIVATE void sqlite3BtreeGetMeta(Btree *p, int idx, u32 *pValue){ *pValue = ipg_meta_get(p->pConn, idx); }
SQLITE_PRIVATE int sqlite3BtreeUpdateMeta(Btree *p, int idx, u32 value){ return ipg_meta_set(p->pConn, idx, value); }
SQLITE_PRIVATE void *sqlite3BtreeSchema(Btree *p, int nBytes, void(*xFree)(void*)){
  if( !p->pSchema && nBytes ){ p->pSchema = sqlite3DbMallocZero(0, nBytes); p->xFreeSchema = xFree; }
  return p->pSchema;
}
SQLITE_PRIVATE int sqlite3BtreeSchemaLocked(Btree *p){ (void)p; return SQLITE_OK; }
/* PRAGMA integrity_check, the b-tree part: the engine's structural check of the file
** (src/ffi.rs ipg_check: checksums, cell bounds, rowid order, index trees' structure,
** overflow chains, page ownership) as SQLite's message list (*pnErr messages in
** *pzOut, "\n"-separated; none: "ok"), and each root's entry count in aCnt for the
** VDBE's table/index comparison. An I/O error aborts the pragma (nErr>0 with rc set:
** OP_IntegrityCk only looks at rc when nErr is nonzero). */
SQLITE_PRIVATE int sqlite3BtreeIntegrityCheck(sqlite3 *db, Btree *p, Pgno *aRoot, sqlite3_value *aCnt,
    int nRoot, int mxErr, int *pnErr, char **pzOut){
  int i, rc, nErr = 0; const char *zMsg = 0; (void)db; (void)mxErr;
  *pnErr = 0; *pzOut = 0;
  if( !p ) return SQLITE_OK;   /* a slot never opened (trap 3) */
  rc = ipg_check(p->pConn, &zMsg, &nErr);
  if( rc ){ *pnErr = 1; return rc; }
  if( nErr>0 ){
    *pzOut = sqlite3_mprintf("%s", zMsg ? zMsg : "inpage: integrity check failed");
    if( !*pzOut ){ *pnErr = 1; return SQLITE_NOMEM; }
    *pnErr = nErr;
  }
  for(i=0; i<nRoot; i++){
    i64 n = 0;
    if( aRoot[i] ) ipg_table_count(p->pConn, aRoot[i], &n);
    sqlite3MemSetArrayInt64(aCnt, i, n);
  }
  return SQLITE_OK;
}
/* VACUUM: replace pTo's trees and meta by a copy of pFrom's (src/ffi.rs ipg_copy);
** both are in a transaction (pTo a write one). Cursors on pTo lose their position. */
SQLITE_PRIVATE int sqlite3BtreeCopyFile(Btree *pTo, Btree *pFrom){
  BtCursor *c;
  for(c=pTo->pCursor; c; c=c->pNext) ipg_invalidate(c->pCur);
  return ipg_copy(pTo->pConn, pFrom->pConn);
}
/* VACUUM in place (vacuum.c, patched by build.rs): pMain, in a write transaction,
** becomes a packed copy of its own committed state (ffi/copy.rs ipg_vacuum_self), then
** takes the meta values VACUUM carries over from vacuum_db (pTemp got them from pMain,
** the schema cookie one up, so other connections reread the schema). The table
** numbers counter (meta 4 here) stays pMain's, whose trees keep their numbers. */
SQLITE_PRIVATE int sqlite3GlueVacuumInPlace(Btree *pMain, Btree *pTemp){
  static const int aKeep[] = { BTREE_SCHEMA_VERSION, BTREE_DEFAULT_CACHE_SIZE,
    BTREE_TEXT_ENCODING, BTREE_USER_VERSION, BTREE_APPLICATION_ID };
  BtCursor *c; int i, rc;
  for(c=pMain->pCursor; c; c=c->pNext) ipg_invalidate(c->pCur);
  rc = ipg_vacuum_self(pMain->pConn);
  /* The auto_vacuum setting VACUUM leaves: the one the connection asked for last, else
  ** the database's own (vacuum.c gives pTemp the same). */
  if( rc==SQLITE_OK ){
    sqlite3 *db = pMain->db;
    rc = ipg_auto_vacuum_vacuum(pMain->pConn, db->nextAutovac>=0 ? db->nextAutovac
                                                  : sqlite3BtreeGetAutoVacuum(pMain));
  }
  for(i=0; rc==SQLITE_OK && i<(int)(sizeof(aKeep)/sizeof(aKeep[0])); i++){
    u32 v; sqlite3BtreeGetMeta(pTemp, aKeep[i], &v);
    rc = sqlite3BtreeUpdateMeta(pMain, aKeep[i], v);
  }
  return rc;
}
SQLITE_PRIVATE const char *sqlite3BtreeGetFilename(Btree *p){ return p->zFilename; }
SQLITE_PRIVATE const char *sqlite3BtreeGetJournalname(Btree *p){ (void)p; return 0; }
SQLITE_PRIVATE int sqlite3BtreeGetPageSize(Btree *p){ return ipg_page_size(p->pConn); }
/* PRAGMA page_size: takes effect while nothing has been written (ipg_set_page_size
** recreates the empty file), ignored after that, as in stock SQLite. */
SQLITE_PRIVATE int sqlite3BtreeSetPageSize(Btree *p, int n, int nReserve, int eFix){
  (void)nReserve; (void)eFix;
  if( p && n>0 ) ipg_set_page_size(p->pConn, n);
  return SQLITE_OK;
}
SQLITE_PRIVATE int sqlite3BtreeGetRequestedReserve(Btree *p){ (void)p; return 0; }
SQLITE_PRIVATE Pgno sqlite3BtreeMaxPageCount(Btree *p, Pgno mx){ (void)p; (void)mx; return 0xfffffffe; }
/* SQLite rejects a schema rootpage > LastPage ("invalid rootpage"): table numbers come
** from a counter (meta 4), so LastPage must cover it. */
SQLITE_PRIVATE Pgno sqlite3BtreeLastPage(Btree *p){
  u32 n = ipg_page_count(p->pConn), m = ipg_meta_get(p->pConn, 4);
  return (Pgno)(n > m ? n : m);
}
SQLITE_PRIVATE int sqlite3BtreeSecureDelete(Btree *p, int f){ (void)p; (void)f; return 0; }
SQLITE_PRIVATE int sqlite3BtreeSetCacheSize(Btree *p, int n){ (void)p; (void)n; return SQLITE_OK; }
SQLITE_PRIVATE int sqlite3BtreeSetSpillSize(Btree *p, int n){ (void)p; (void)n; return SQLITE_OK; }
SQLITE_PRIVATE int sqlite3BtreeSetMmapLimit(Btree *p, sqlite3_int64 n){ (void)p; (void)n; return SQLITE_OK; }
SQLITE_PRIVATE int sqlite3BtreeSetPagerFlags(Btree *p, unsigned f){ (void)p; (void)f; return SQLITE_OK; }
SQLITE_PRIVATE int sqlite3BtreeIsReadonly(Btree *p){ return p ? ipg_read_only(p->pConn) : 0; }
/* auto_vacuum (src/ffi/vacuum.rs): the setting lives in the engine's header; FULL gives
** free pages back in the engine's commit, incremental_vacuum one page per call here.
** Modes whose pages cannot move refuse FULL and INCREMENTAL with SQLITE_READONLY, which
** the pragma ignores, so it keeps reading 0 there. Cursors re-seek after a move (the
** engine's generations), as after a rollback. */
SQLITE_PRIVATE int sqlite3BtreeGetAutoVacuum(Btree *p){ return p ? ipg_auto_vacuum_get(p->pConn) : BTREE_AUTOVACUUM_NONE; }
SQLITE_PRIVATE int sqlite3BtreeSetAutoVacuum(Btree *p, int a){ return p ? ipg_auto_vacuum_set(p->pConn, a) : SQLITE_OK; }
SQLITE_PRIVATE int sqlite3BtreeIncrVacuum(Btree *p){ return ipg_incr_vacuum(p->pConn); }
/* The file format version bytes (18-19) of a stock file: inpage's header has none. */
SQLITE_PRIVATE int sqlite3BtreeSetVersion(Btree *p, int v){ (void)p; (void)v; return SQLITE_OK; }
/* PRAGMA wal_checkpoint, sqlite3_wal_checkpoint_v2: the engine's checkpoint in a mode
** with a log (ffi/copy.rs ipg_checkpoint); TRUNCATE also cuts the log's file to zero
** bytes. pnLog/pnCkpt stay as the caller set them otherwise, as SQLite leaves them for a
** database not in WAL mode. */
SQLITE_PRIVATE int sqlite3BtreeCheckpoint(Btree *p, int eMode, int *pnLog, int *pnCkpt){
  int nLog = -1, nCkpt = -1, rc;
  if( !p ) return SQLITE_OK;
  rc = ipg_checkpoint(p->pConn, eMode==SQLITE_CHECKPOINT_TRUNCATE, &nLog, &nCkpt);
  if( rc==SQLITE_OK && nLog>=0 ){
    if( pnLog ) *pnLog = nLog;
    if( pnCkpt ) *pnCkpt = nCkpt;
  }
  return rc;
}
/* sqlite3_close and DETACH refuse a database a backup is using (stock's check). */
SQLITE_PRIVATE int sqlite3BtreeIsInBackup(Btree *p){ return p && p->nBackup>0; }
SQLITE_PRIVATE void sqlite3BtreeClearCache(Btree *p){ (void)p; }
SQLITE_PRIVATE struct Pager *sqlite3BtreePager(Btree *p){ return &p->pager; }
SQLITE_PRIVATE int sqlite3HeaderSizeBtree(void){ return 0; }

/* ---- cursors ---- */
static BtCursor glueFakeCursor = { 1 };
SQLITE_PRIVATE BtCursor *sqlite3BtreeFakeValidCursor(void){ return &glueFakeCursor; }
SQLITE_PRIVATE int sqlite3BtreeCursorSize(void){ return ROUND8(sizeof(BtCursor)); }
SQLITE_PRIVATE void sqlite3BtreeCursorZero(BtCursor *c){ memset(c, 0, sizeof(*c)); }
/* How many leading fields an insert into index tree iTable places its entry by:
** OP_IdxInsert passes uniqNotNull ? nKeyCol : nColumn (sqlite3CompleteInsertion), so a
** UNIQUE NOT NULL index (and a WITHOUT ROWID table's primary key) is ordered by its key
** columns only. The tree's symmetric order must use the same fields, or a separator left
** by a deleted entry that is equal on them (e.g. 'Date' vs 'date' under NOCASE) sends an
** insert and a later search of the same key to different children. 0 = all fields (an
** index this connection's schema does not know: ephemeral and sorter trees, which are
** placed by their whole record). */
static int ipgOrderFields(Btree *p, Pgno iTable, KeyInfo *pKeyInfo){
  sqlite3 *db;
  int i;
  if( !pKeyInfo || !pKeyInfo->db ) return 0;
  db = pKeyInfo->db;
  for(i=0; i<db->nDb; i++){
    Schema *pSchema;
    HashElem *k;
    if( db->aDb[i].pBt!=p || (pSchema = db->aDb[i].pSchema)==0 ) continue;
    for(k=sqliteHashFirst(&pSchema->idxHash); k; k=sqliteHashNext(k)){
      Index *pIdx = (Index*)sqliteHashData(k);
      if( pIdx->tnum==iTable ){
        return pIdx->uniqNotNull ? pIdx->nKeyCol : pIdx->nColumn;
      }
    }
  }
  return 0;
}
SQLITE_PRIVATE int sqlite3BtreeCursor(Btree *p, Pgno iTable, int wrFlag, struct KeyInfo *pKeyInfo, BtCursor *c){
  memset(c, 0, sizeof(*c));
  c->pBtree = p; c->iTable = (int)iTable; c->wrFlag = (u8)(wrFlag!=0); c->pKeyInfo = pKeyInfo;
  c->pCur = ipg_cursor_open(p->pConn, (u32)iTable, pKeyInfo, ipgOrderFields(p, iTable, pKeyInfo), &c->run);
  if( !c->pCur ) return SQLITE_NOMEM;
  c->pNext = p->pCursor; p->pCursor = c;
  return SQLITE_OK;
}
SQLITE_PRIVATE int sqlite3BtreeCloseCursor(BtCursor *c){
  BtCursor **pp;
  if( !c->pBtree ) return SQLITE_OK;
  for(pp=&c->pBtree->pCursor; *pp; pp=&(*pp)->pNext) if( *pp==c ){ *pp = c->pNext; break; }
  ipg_cursor_close(c->pCur);
  sqlite3_free(c->staged);
  memset(c, 0, sizeof(*c));
  return SQLITE_OK;
}
#define FAULT_CHECK(c) if( (c)->fault ) return (c)->faultCode
SQLITE_PRIVATE void sqlite3BtreeCursorHintFlags(BtCursor *c, unsigned m){ (void)c; (void)m; }
SQLITE_PRIVATE int sqlite3BtreeCursorHasHint(BtCursor *c, unsigned int m){ (void)c; (void)m; return 0; }
SQLITE_PRIVATE int sqlite3BtreeTableMoveto(BtCursor *c, i64 intKey, int bias, int *pRes){
  (void)bias; FAULT_CHECK(c);
  return ipg_seek_int(c->pCur, intKey, pRes);
}
SQLITE_PRIVATE int sqlite3BtreeIndexMoveto(BtCursor *c, UnpackedRecord *pRec, int *pRes){
  int rc;
  FAULT_CHECK(c);
  pRec->errCode = 0;    /* the VDBE leaves it uninitialised */
  rc = ipg_seek_probe(c->pCur, pRec, pRes);
  if( rc==SQLITE_OK && pRec->errCode ) rc = pRec->errCode;
  return rc;
}
SQLITE_PRIVATE int sqlite3BtreeCursorHasMoved(BtCursor *c){
  if( !c->pCur ) return 0;   /* the fake valid cursor */
  if( c->run->n ) return c->fault;   /* a read snapshot's row: never moves */
  return c->fault || ipg_has_moved(c->pCur);
}
SQLITE_PRIVATE int sqlite3BtreeCursorRestore(BtCursor *c, int *pDifferentRow){
  FAULT_CHECK(c);
  return ipg_restore(c->pCur, pDifferentRow);
}
SQLITE_PRIVATE int sqlite3BtreeFirst(BtCursor *c, int *pRes){ FAULT_CHECK(c); return ipg_first(c->pCur, 0, pRes); }
SQLITE_PRIVATE int sqlite3BtreeLast(BtCursor *c, int *pRes){ FAULT_CHECK(c); return ipg_first(c->pCur, 1, pRes); }
/* Like SQLite's own (which moves the cursor to the root), this may move the cursor:
** one descent to the first entry instead of counting the tree. */
SQLITE_PRIVATE int sqlite3BtreeIsEmpty(BtCursor *c, int *pRes){
  FAULT_CHECK(c);
  return ipg_first(c->pCur, 0, pRes);
}
SQLITE_PRIVATE int sqlite3BtreeEof(BtCursor *c){
  if( !c->pCur ) return 0;
  return c->run->n ? 0 : !ipg_valid(c->pCur);
}
SQLITE_PRIVATE int sqlite3BtreeNext(BtCursor *c, int flags){
  IpgRun *r;
  (void)flags; FAULT_CHECK(c);
  r = c->run;
  if( r && r->i+1 < r->n ){ r->i++; return SQLITE_OK; }
  return ipg_step(c->pCur, 1);
}
SQLITE_PRIVATE int sqlite3BtreePrevious(BtCursor *c, int flags){ (void)flags; FAULT_CHECK(c); return ipg_step(c->pCur, -1); }
SQLITE_PRIVATE i64 sqlite3BtreeIntegerKey(BtCursor *c){
  if( c->run && c->run->n ) return c->run->rows[c->run->i].key;
  return ipg_intkey(c->pCur);
}
/* The row under the cursor. Never NULL: OP_Column reads the first byte of what
** PayloadFetch returns before it checks any size, so a row the engine cannot read (a
** damaged page or overflow chain; found by the SQL crash torture) was a NULL
** dereference. Such a row reads as zero bytes whose first byte (past the end) claims a
** one-byte record header: more than the payload size, which is SQLite's own test for a
** corrupt record (OP_Column, IdxRowid: SQLITE_CORRUPT), so the statement fails instead
** of reading NULLs. The cursor is also tripped with the engine's code, so later calls on
** it fail with that code. An empty payload gets the same bytes: no SQLite record is
** empty (its header size is at least one byte), and the pointer the Rust side has for
** an empty value may not be readable. */
static const u8 glueNoRow[8] = { 1 };
/* *pN gets how many bytes the returned pointer holds, *pTotal the record's size: more
** when the value is a large one in an overflow chain, of which only a prefix is handed
** out (ffi.rs PREFIX; a stock cell's local part plays that role). SQLite reads past it
** by range (sqlite3BtreePayload), so a blob open or a column read costs the pages it
** touches, not the whole value. */
static const u8 *gluePayload2(BtCursor *c, u32 *pN, u32 *pTotal){
  const u8 *p = 0; int rc; *pN = 0; *pTotal = 0;
  if( c->run && c->run->n ){
    const IpgRow *w = &c->run->rows[c->run->i];
    p = w->pay; *pN = *pTotal = w->n;
  }else if( c->run && c->run->pay ){
    /* What ipg_payload handed out for this position (ffi.rs Run::pay). */
    p = c->run->pay; *pN = c->run->nPay; *pTotal = c->run->nTotal;
  }else if( c->pCur ){
    rc = ipg_payload(c->pCur, &p, pN, pTotal);
    if( rc!=SQLITE_OK && !c->fault ){ c->fault = 1; c->faultCode = rc; }
  }
  if( !p || *pN==0 ){ *pN = *pTotal = 0; p = glueNoRow; }
  return p;
}
static const u8 *gluePayload(BtCursor *c, u32 *pN){ u32 nTotal; return gluePayload2(c, pN, &nTotal); }
SQLITE_PRIVATE u32 sqlite3BtreePayloadSize(BtCursor *c){ u32 n, nTotal; gluePayload2(c, &n, &nTotal); return nTotal; }
SQLITE_PRIVATE sqlite3_int64 sqlite3BtreeMaxRecordSize(BtCursor *c){ (void)c; return SQLITE_MAX_LENGTH; }
SQLITE_PRIVATE int sqlite3BtreePayload(BtCursor *c, u32 offset, u32 amt, void *pBuf){
  u32 n, nTotal; const u8 *p = gluePayload2(c, &n, &nTotal);
  int rc;
  FAULT_CHECK(c);
  if( (u64)offset+amt <= (u64)n ){ memcpy(pBuf, p+offset, amt); return SQLITE_OK; }
  if( (u64)offset+amt > (u64)nTotal ) return SQLITE_CORRUPT_BKPT;
  rc = ipg_payload_range(c->pCur, offset, amt, (u8*)pBuf);
  return rc==SQLITE_CORRUPT ? SQLITE_CORRUPT_BKPT : rc;
}
SQLITE_PRIVATE int sqlite3BtreePayloadChecked(BtCursor *c, u32 offset, u32 amt, void *pBuf){
  FAULT_CHECK(c);
  if( ipg_has_moved(c->pCur) ) return SQLITE_ABORT;
  return sqlite3BtreePayload(c, offset, amt, pBuf);
}
SQLITE_PRIVATE const void *sqlite3BtreePayloadFetch(BtCursor *c, u32 *pAmt){ return gluePayload(c, pAmt); }
SQLITE_PRIVATE int sqlite3BtreeCursorIsValidNN(BtCursor *c){
  if( !c->pCur ) return 1;
  return c->run->n ? 1 : ipg_valid(c->pCur);
}
SQLITE_PRIVATE void sqlite3BtreeCursorPin(BtCursor *c){ (void)c; }
SQLITE_PRIVATE void sqlite3BtreeCursorUnpin(BtCursor *c){ (void)c; }
SQLITE_PRIVATE void sqlite3BtreeClearCursor(BtCursor *c){ if( c->pCur ) ipg_invalidate(c->pCur); }
/* Not a file offset (the engine owns the file) but what SQLite uses it for: an identity
** of the row under the cursor, by which OP_Column keys its cache of a large column
** read by range (vdbeColumnFromOverflow). A constant here served one row's cached
** value for the next row's. ffi.rs Run::pos changes whenever the engine cursor moves;
** i is the position within a row run (under 2^20 rows per leaf). */
SQLITE_PRIVATE i64 sqlite3BtreeOffset(BtCursor *c){
  if( !c->run ) return 0;
  return (i64)(((c->run->pos & 0x7ffffffffffULL)<<20) | c->run->i);
}
SQLITE_PRIVATE i64 sqlite3BtreeRowCountEst(BtCursor *c){ (void)c; return -1; }
SQLITE_PRIVATE int sqlite3BtreeCount(sqlite3 *db, BtCursor *c, i64 *pn){ (void)db; return ipg_count(c->pCur, pn); }
/* An index record goes where the probe puts it: the first nMem fields when given
** (WITHOUT ROWID: the primary key, so the entry equal under them is replaced whatever
** its bytes, trap 7), else the whole record. errCode is zeroed before the engine call
** and checked after (trap 2). */
static int glueIndexInsert(BtCursor *c, const u8 *pKey, int nKey, Mem *aMem, int nMem){
  UnpackedRecord r, *p = &r; int rc;
  if( nMem ){
    memset(&r, 0, sizeof(r));
    r.pKeyInfo = c->pKeyInfo; r.aMem = aMem; r.nField = (u16)nMem;
  }else{
    p = sqlite3VdbeAllocUnpackedRecord(c->pKeyInfo);
    if( !p ) return SQLITE_NOMEM;
    sqlite3VdbeRecordUnpack(nKey, pKey, p);
  }
  p->default_rc = 0; p->errCode = 0;
  rc = ipg_insert_index(c->pCur, pKey, nKey, p);
  if( rc==SQLITE_OK && p->errCode ) rc = p->errCode;
  if( p!=&r ) sqlite3DbFree(c->pKeyInfo->db, p);
  return rc;
}
static int glueInsert(BtCursor *c, const BtreePayload *pX, int flags, int seekResult){
  (void)seekResult; FAULT_CHECK(c);
  glueEndTableRuns(c->pBtree, c->iTable);
  if( c->pKeyInfo==0 ){   /* intkey table */
    if( flags & BTREE_PREFORMAT ) return ipg_insert(c->pCur, pX->nKey, c->staged, c->nStaged, 0);
    return ipg_insert(c->pCur, pX->nKey, pX->pData, pX->nData, pX->nZero);
  }
  if( flags & BTREE_PREFORMAT ) return glueIndexInsert(c, c->staged, c->nStaged, 0, 0);
  return glueIndexInsert(c, pX->pKey, (int)pX->nKey, pX->aMem, pX->nMem);
}
/* Keys of any size are stored whole (the engine keeps a long key's tail in an overflow
** chain), so an index record or WITHOUT ROWID row is never hashed or truncated. The
** engine still refuses a key or value over u32::MAX bytes with SQLITE_TOOBIG (SQLite's
** own length limit normally stops those first); the VDBE's message for that code is
** generic, so the exact sizes go to sqlite3_log. */
SQLITE_PRIVATE int sqlite3BtreeInsert(BtCursor *c, const BtreePayload *pX, int flags, int seekResult){
  int rc = glueInsert(c, pX, flags, seekResult);
  if( rc==SQLITE_TOOBIG ) sqlite3_log(rc, "inpage: %s", ipg_errmsg(c->pBtree->pConn));
  return rc;
}
SQLITE_PRIVATE int sqlite3BtreeDelete(BtCursor *c, u8 flags){
  FAULT_CHECK(c);
  glueEndTableRuns(c->pBtree, c->iTable);
  return ipg_delete(c->pCur, (flags & BTREE_SAVEPOSITION)!=0);
}
SQLITE_PRIVATE int sqlite3BtreeTransferRow(BtCursor *pDest, BtCursor *pSrc, i64 iKey){
  u32 n, nTotal; int rc; (void)iKey;
  gluePayload2(pSrc, &n, &nTotal);
  FAULT_CHECK(pSrc);
  sqlite3_free(pDest->staged);
  pDest->nStaged = 0;
  pDest->staged = sqlite3_malloc64((u64)nTotal+1);
  if( !pDest->staged ) return SQLITE_NOMEM;
  rc = sqlite3BtreePayload(pSrc, 0, nTotal, pDest->staged);
  if( rc==SQLITE_OK ) pDest->nStaged = (int)nTotal;
  return rc;
}
SQLITE_PRIVATE void sqlite3BtreeIncrblobCursor(BtCursor *c){ (void)c; }
/* Incremental blob writes: the engine writes the range where the value lives, in place
** under a layout that overwrites pages in place (ffi.rs ipg_put_data), never copying
** the whole record through here. */
SQLITE_PRIVATE int sqlite3BtreePutData(BtCursor *c, u32 offset, u32 amt, void *z){
  int rc;
  FAULT_CHECK(c);
  if( !c->wrFlag ) return SQLITE_READONLY;   /* a blob opened read-only */
  glueEndTableRuns(c->pBtree, c->iTable);
  if( ipg_has_moved(c->pCur) ) return SQLITE_ABORT;
  rc = ipg_put_data(c->pCur, offset, z, (int)amt);
  return rc==SQLITE_CORRUPT ? SQLITE_CORRUPT_BKPT : rc;
}

/* ---- pager ---- */
/* The database's sqlite3_file as sqlite3_file_control sees it: there is no SQLite file
** underneath (the engine owns the files), so file-level opcodes answer SQLITE_NOTFOUND,
** except the ones pragmas read: SQLITE_FCNTL_MMAP_SIZE answers 0 (no memory-mapped I/O,
** as a build with mmap off does). Any I/O through it fails. */
static int glueFileClose(sqlite3_file *f){ (void)f; return SQLITE_OK; }
static int glueFileRead(sqlite3_file *f, void *b, int n, sqlite3_int64 o){ (void)f; (void)b; (void)n; (void)o; return SQLITE_IOERR_READ; }
static int glueFileWrite(sqlite3_file *f, const void *b, int n, sqlite3_int64 o){ (void)f; (void)b; (void)n; (void)o; return SQLITE_IOERR_WRITE; }
static int glueFileTruncate(sqlite3_file *f, sqlite3_int64 n){ (void)f; (void)n; return SQLITE_IOERR_TRUNCATE; }
static int glueFileSync(sqlite3_file *f, int fl){ (void)f; (void)fl; return SQLITE_OK; }
static int glueFileSize(sqlite3_file *f, sqlite3_int64 *p){ (void)f; *p = 0; return SQLITE_OK; }
static int glueFileLock(sqlite3_file *f, int l){ (void)f; (void)l; return SQLITE_OK; }
static int glueFileReserved(sqlite3_file *f, int *pRes){ (void)f; *pRes = 0; return SQLITE_OK; }
static int glueFileControl(sqlite3_file *f, int op, void *pArg){
  (void)f;
  if( op==SQLITE_FCNTL_MMAP_SIZE ){ *(sqlite3_int64*)pArg = 0; return SQLITE_OK; }
  return SQLITE_NOTFOUND;
}
static int glueFileSectorSize(sqlite3_file *f){ (void)f; return 4096; }
static int glueFileDevChar(sqlite3_file *f){ (void)f; return 0; }
static const sqlite3_io_methods glueNoFileMethods = {
  1, glueFileClose, glueFileRead, glueFileWrite, glueFileTruncate, glueFileSync,
  glueFileSize, glueFileLock, glueFileLock, glueFileReserved, glueFileControl,
  glueFileSectorSize, glueFileDevChar
};
static sqlite3_file glueNoFile = { &glueNoFileMethods };
SQLITE_PRIVATE void sqlite3PagerCacheStat(Pager *p, int e, int r, u64 *pn){ (void)p; (void)e; (void)r; *pn = 0; }
SQLITE_PRIVATE u32 sqlite3PagerDataVersion(Pager *p){ return ipg_data_version(p->pBt->pConn); }
SQLITE_PRIVATE int sqlite3PagerExclusiveLock(Pager *p){ (void)p; return SQLITE_OK; }
SQLITE_PRIVATE sqlite3_file *sqlite3PagerFile(Pager *p){ (void)p; return &glueNoFile; }
SQLITE_PRIVATE sqlite3_file *sqlite3PagerJrnlFile(Pager *p){ (void)p; return &glueNoFile; }
SQLITE_PRIVATE int sqlite3PagerFlush(Pager *p){ (void)p; return SQLITE_OK; }
SQLITE_PRIVATE int sqlite3PagerGetJournalMode(Pager *p){ return ipg_mode_code(p->pBt->pConn); }
/* A mode is the file's (inpage refuses to open a file in another mode): a change is
** refused by answering the mode in use, as SQLite does for a refused change. */
SQLITE_PRIVATE int sqlite3PagerSetJournalMode(Pager *p, int e){
  /* Inside BEGIN ... COMMIT the mode stays, as SQLite refuses a WAL switch there. */
  if( p->pBt->db && !p->pBt->db->autoCommit ) e = -1;
  return ipg_set_mode(p->pBt->pConn, e);
}
SQLITE_PRIVATE int sqlite3PagerOkToChangeJournalMode(Pager *p){ (void)p; return 1; /* ipg_set_mode decides */ }
SQLITE_PRIVATE int sqlite3PagerIsMemdb(Pager *p){ return p->pBt->isMem; }
/* PRAGMA journal_size_limit: the engine cuts its log (or persisted journal) back to it
** when it next resets, as stock's pager does (ffi.rs ipg_set_log_limits). */
SQLITE_PRIVATE i64 sqlite3PagerJournalSizeLimit(Pager *p, i64 n){
  if( n>=-1 ){   /* -2: a query */
    p->journalSizeLimit = n;
    if( !p->pBt->isMem ) ipg_set_log_limits(p->pBt->pConn, n, -1);
  }
  return p->journalSizeLimit;
}
SQLITE_PRIVATE int sqlite3PagerLockingMode(Pager *p, int e){
  if( e==PAGER_LOCKINGMODE_NORMAL || e==PAGER_LOCKINGMODE_EXCLUSIVE ) p->eLock = e;
  return p->eLock;
}
SQLITE_PRIVATE int sqlite3PagerMemUsed(Pager *p){ (void)p; return 0; }
SQLITE_PRIVATE void sqlite3PagerShrink(Pager *p){ (void)p; }
SQLITE_PRIVATE sqlite3_vfs *sqlite3PagerVfs(Pager *p){ return p->pVfs; }
SQLITE_PRIVATE const char *sqlite3PagerFilename(const Pager *p, int nullIfMemDb){
  if( p->pBt->isMem ) return nullIfMemDb ? 0 : "";
  return p->pBt->zFilename;
}
/* The engine checkpoints its own log, after as many frames as PRAGMA wal_autocheckpoint
** (sqlite3_wal_autocheckpoint) asks: SQLite calls this after each commit, and the
** connection's default hook carries the number (0 when checkpoints were turned off; a
** custom hook leaves the engine's setting). SQLite's hook then sees no frames, so it
** never checkpoints on top. */
SQLITE_PRIVATE int sqlite3PagerWalCallback(Pager *p){
  sqlite3 *db = p->pBt->db;
  int n = -1;
  if( !db || p->pBt->isMem ) return 0;
  if( db->xWalCallback==sqlite3WalDefaultHook ) n = SQLITE_PTR_TO_INT(db->pWalArg);
  else if( db->xWalCallback==0 ) n = 0;
  if( n>=0 && n!=p->nAutoCkpt ){
    p->nAutoCkpt = n;
    ipg_set_log_limits(p->pBt->pConn, -2, n);
  }
  return 0;
}
/* Every file database can be switched to the engine's wal mode (while empty). */
SQLITE_PRIVATE int sqlite3PagerWalSupported(Pager *p){ return !p->pBt->isMem; }
/* Leaving WAL mode: nothing to close here (the engine's mode is the file's). */
SQLITE_PRIVATE int sqlite3PagerCloseWal(Pager *p, sqlite3 *db){ (void)p; (void)db; return SQLITE_OK; }
/* memdb.c (the "memdb" VFS behind stock deserialize) is cut: deserialize opens an
** in-memory engine database instead (sqlite3_deserialize below). */
SQLITE_PRIVATE int sqlite3MemdbInit(void){ return SQLITE_OK; }
SQLITE_PRIVATE int sqlite3IsMemdb(const sqlite3_vfs *p){ (void)p; return 0; }

/* ---- public shims ---- */
/* The online backup API in steps (ffi/copy.rs Backup): each step copies whole trees
** (sqlite_schema, each table and index) into one write transaction on the destination,
** begun by the first step and committed by the one that copies the last tree; a step
** that finds the source changed since the previous one starts the copy over (as SQLite
** restarts when another connection writes the source). Progress counts trees.
** Both connections' mutexes are held during each call. */
struct sqlite3_backup {
  sqlite3 *pDestDb; Btree *pDest;
  sqlite3 *pSrcDb; Btree *pSrc;
  Backup *pState;
  int rc;            /* SQLITE_OK while more may be copied; then SQLITE_DONE or the error */
  int nRemaining, nPagecount;
  int bDestLocked;   /* this backup began the destination's write transaction */
};
static void glueBackupEnter(sqlite3_backup *p){
  sqlite3_mutex_enter(p->pSrcDb->mutex);
  sqlite3_mutex_enter(p->pDestDb->mutex);
}
static void glueBackupLeave(sqlite3_backup *p){
  sqlite3_mutex_leave(p->pDestDb->mutex);
  sqlite3_mutex_leave(p->pSrcDb->mutex);
}
/* The b-tree of database zDb of pDb, opening TEMP if that is the one asked for (it is
** opened lazily); errors go to pErrorDb. */
static Btree *glueFindBtree(sqlite3 *pErrorDb, sqlite3 *pDb, const char *zDb){
  int i = sqlite3FindDbName(pDb, zDb);
  if( i==1 ){
    Parse sParse; int bad;
    sqlite3ParseObjectInit(&sParse, pDb);
    bad = sqlite3OpenTempDatabase(&sParse);
    if( bad ) sqlite3ErrorWithMsg(pErrorDb, sParse.rc, "%s", sParse.zErrMsg);
    sqlite3DbFree(pErrorDb, sParse.zErrMsg);
    sqlite3ParseObjectReset(&sParse);
    if( bad ) return 0;
  }
  if( i<0 ){
    sqlite3ErrorWithMsg(pErrorDb, SQLITE_ERROR, "unknown database %s", zDb);
    return 0;
  }
  return pDb->aDb[i].pBt;
}
SQLITE_API sqlite3_backup *sqlite3_backup_init(sqlite3 *pDest, const char *zDestName, sqlite3 *pSource, const char *zSourceName){
  sqlite3_backup *p = 0;
  Btree *pS = 0, *pD = 0;
  if( !sqlite3SafetyCheckOk(pSource) || !sqlite3SafetyCheckOk(pDest) ){
    (void)SQLITE_MISUSE_BKPT;
    return 0;
  }
  sqlite3_mutex_enter(pSource->mutex);
  sqlite3_mutex_enter(pDest->mutex);
  if( pSource==pDest ){
    sqlite3ErrorWithMsg(pDest, SQLITE_ERROR, "source and destination must be distinct");
  }else if( (pS = glueFindBtree(pDest, pSource, zSourceName))!=0
         && (pD = glueFindBtree(pDest, pDest, zDestName))!=0 ){
    if( sqlite3BtreeTxnState(pD)!=SQLITE_TXN_NONE ){
      sqlite3ErrorWithMsg(pDest, SQLITE_ERROR, "destination database is in use");
    }else if( ipg_read_only(pD->pConn) ){
      sqlite3ErrorWithMsg(pDest, SQLITE_READONLY, "destination database is read-only");
    }else{
      p = sqlite3_malloc64(sizeof(*p));
      if( !p ){
        sqlite3Error(pDest, SQLITE_NOMEM);
      }else{
        memset(p, 0, sizeof(*p));
        p->pDestDb = pDest; p->pDest = pD; p->pSrcDb = pSource; p->pSrc = pS;
        p->pState = ipg_backup_new();
        p->nRemaining = p->nPagecount = -1;
        pS->nBackup++; pD->nBackup++;
      }
    }
  }
  sqlite3_mutex_leave(pDest->mutex);
  sqlite3_mutex_leave(pSource->mutex);
  return p;
}
/* End the destination's transaction this backup began (commit or roll back). */
static int glueBackupEndDest(sqlite3_backup *p, int commit){
  int rc = SQLITE_OK;
  if( !p->bDestLocked ) return SQLITE_OK;
  p->bDestLocked = 0;
  if( commit ){
    rc = sqlite3BtreeCommitPhaseOne(p->pDest, 0);
    if( rc==SQLITE_OK ) rc = sqlite3BtreeCommitPhaseTwo(p->pDest, 0);
  }
  if( !commit || rc!=SQLITE_OK ) sqlite3BtreeRollback(p->pDest, SQLITE_OK, 0);
  return rc;
}
SQLITE_API int sqlite3_backup_step(sqlite3_backup *p, int nPage){
  int rc;
  if( !p ) return SQLITE_MISUSE_BKPT;
  glueBackupEnter(p);
  if( p->rc!=SQLITE_OK ){ rc = p->rc; glueBackupLeave(p); return rc; }
  rc = SQLITE_OK;
  if( !p->bDestLocked ){
    rc = sqlite3BtreeBeginTrans(p->pDest, 2, 0);
    if( rc==SQLITE_OK ) p->bDestLocked = 1;
  }
  if( rc==SQLITE_OK ){
    rc = ipg_backup_step(p->pState, p->pDest->pConn, p->pSrc->pConn, nPage,
                         &p->nRemaining, &p->nPagecount);
  }
  if( rc==SQLITE_DONE ){
    rc = glueBackupEndDest(p, 1);
    if( rc==SQLITE_OK ){
      /* The destination's schema changed under its connection: reparse on next use. */
      sqlite3ResetAllSchemasOfConnection(p->pDestDb);
      rc = SQLITE_DONE;
    }
  }else if( rc!=SQLITE_OK && rc!=SQLITE_BUSY && rc!=SQLITE_LOCKED ){
    glueBackupEndDest(p, 0);
  }
  /* BUSY and LOCKED leave the backup retryable, as in SQLite. */
  if( rc!=SQLITE_OK && rc!=SQLITE_BUSY && rc!=SQLITE_LOCKED ) p->rc = rc;
  glueBackupLeave(p);
  return rc;
}
SQLITE_API int sqlite3_backup_finish(sqlite3_backup *p){
  sqlite3 *pDest; int rc;
  if( !p ) return SQLITE_OK;
  pDest = p->pDestDb;
  glueBackupEnter(p);
  glueBackupEndDest(p, 0);   /* an unfinished backup leaves the destination as it was */
  p->pSrc->nBackup--; p->pDest->nBackup--;
  rc = (p->rc==SQLITE_DONE) ? SQLITE_OK : p->rc;
  sqlite3Error(pDest, rc);
  glueBackupLeave(p);
  ipg_backup_free(p->pState);
  sqlite3_free(p);
  return rc;
}
SQLITE_API int sqlite3_backup_remaining(sqlite3_backup *p){ return p && p->nRemaining>=0 ? p->nRemaining : 0; }
SQLITE_API int sqlite3_backup_pagecount(sqlite3_backup *p){ return p && p->nPagecount>=0 ? p->nPagecount : 0; }
SQLITE_API sqlite3_file *sqlite3_database_file_object(const char *z){ (void)z; return 0; }
SQLITE_API int sqlite3_enable_shared_cache(int e){ (void)e; return SQLITE_OK; }
/* An image of a database: an inpage file holding a copy of it (ffi/copy.rs). NOCOPY has
** no buffer to hand out (there is no in-memory file image to point into): NULL, as
** SQLite answers for a database that is not an in-memory one. */
SQLITE_API unsigned char *sqlite3_serialize(sqlite3 *db, const char *zSchema, sqlite3_int64 *piSize, unsigned int mFlags){
  int iDb, rc; Btree *p; const u8 *a = 0; i64 n = 0; unsigned char *out = 0;
  if( piSize ) *piSize = -1;
  if( !sqlite3SafetyCheckOk(db) ){ (void)SQLITE_MISUSE_BKPT; return 0; }
  if( zSchema==0 ) zSchema = db->aDb[0].zDbSName;
  sqlite3_mutex_enter(db->mutex);
  iDb = sqlite3FindDbName(db, zSchema);
  p = iDb<0 ? 0 : db->aDb[iDb].pBt;
  if( p && !(mFlags & SQLITE_SERIALIZE_NOCOPY) ){
    rc = ipg_serialize(p->pConn, &a, &n);
    if( rc==SQLITE_OK ){
      out = sqlite3_malloc64(n>0 ? n : 1);
      if( out ){
        memcpy(out, a, (size_t)n);
        if( piSize ) *piSize = n;
      }else{
        sqlite3Error(db, SQLITE_NOMEM);
      }
    }else{
      sqlite3ErrorWithMsg(db, rc, "%s", ipg_errmsg(p->pConn));
    }
  }
  sqlite3_mutex_leave(db->mutex);
  return out;
}
/* Replace database zSchema by the image pData[0..szDb) (from sqlite3_serialize), as a
** private in-memory database. TEMP cannot be replaced, nor a database in a transaction
** or with statements running; an image that is not a database is SQLITE_NOTADB ("file
** is not a database") and changes nothing. The bytes are copied, so FREEONCLOSE frees
** them at once. */
SQLITE_API int sqlite3_deserialize(sqlite3 *db, const char *zSchema, unsigned char *pData, sqlite3_int64 szDb, sqlite3_int64 szBuf, unsigned mFlags){
  int iDb, rc = SQLITE_OK; Btree *p = 0;
  (void)szBuf;
  if( !sqlite3SafetyCheckOk(db) ) return SQLITE_MISUSE_BKPT;
  if( szDb<0 ) return SQLITE_MISUSE_BKPT;
  if( zSchema==0 ) zSchema = db->aDb[0].zDbSName;
  sqlite3_mutex_enter(db->mutex);
  iDb = sqlite3FindDbName(db, zSchema);
  if( iDb<2 && iDb!=0 ){
    rc = SQLITE_ERROR;
  }else{
    p = db->aDb[iDb].pBt;
    if( !p ) rc = SQLITE_ERROR;
    else if( db->nVdbeActive>0 || sqlite3BtreeTxnState(p)!=SQLITE_TXN_NONE ) rc = SQLITE_BUSY;
  }
  if( rc!=SQLITE_OK ){
    sqlite3Error(db, rc);
  }else{
    BtCursor *c;
    while( (c = p->pCursor)!=0 ) sqlite3BtreeCloseCursor(c);
    rc = ipg_deserialize(p->pConn, pData, szDb, (mFlags & SQLITE_DESERIALIZE_READONLY)!=0);
    if( rc==SQLITE_OK ){
      p->isMem = 1;
      sqlite3ResetAllSchemasOfConnection(db);
      sqlite3Error(db, SQLITE_OK);
    }else if( rc==SQLITE_NOTADB ){
      sqlite3ErrorWithMsg(db, rc, "file is not a database");
    }else{
      sqlite3ErrorWithMsg(db, rc, "%s", ipg_errmsg(p->pConn));
    }
  }
  if( pData && (mFlags & SQLITE_DESERIALIZE_FREEONCLOSE)!=0 ) sqlite3_free(pData);
  sqlite3_mutex_leave(db->mutex);
  return rc;
}


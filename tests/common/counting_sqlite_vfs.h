// For tests: a SQLite VFS that forwards to the default one and counts the syncs of files whose
// name ends in "-wal", so a test can say how many times a store waited for its write-ahead log to
// reach the disk. Registered as the default VFS for the life of the object (databases opened
// meanwhile use it; open and close them inside that life). One at a time; not thread-safe.
#pragma once

#include <sqlite3.h>

#include <cstring>
#include <string>

namespace trainlet::testing {

class CountingSqliteVfs {
 public:
  CountingSqliteVfs() {
    real_ = sqlite3_vfs_find(nullptr);
    vfs_ = *real_;
    vfs_.zName = "trainlet-counting";
    vfs_.szOsFile = static_cast<int>(sizeof(File)) + real_->szOsFile;
    vfs_.pAppData = this;
    vfs_.xOpen = &Open;
    Methods();
    sqlite3_vfs_register(&vfs_, /*makeDflt=*/1);
  }
  ~CountingSqliteVfs() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(real_, 1);
  }
  CountingSqliteVfs(const CountingSqliteVfs&) = delete;
  CountingSqliteVfs& operator=(const CountingSqliteVfs&) = delete;

  int wal_syncs() const { return wal_syncs_; }

 private:
  struct File {
    sqlite3_file base;
    CountingSqliteVfs* owner;
    bool wal;
    sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
  };
  static File* F(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

  static int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out) {
    auto* self = static_cast<CountingSqliteVfs*>(vfs->pAppData);
    File* f = F(file);
    f->base.pMethods = nullptr;
    const int rc = self->real_->xOpen(self->real_, name, f->real(), flags, out);
    if (rc != SQLITE_OK || f->real()->pMethods == nullptr) return rc;
    f->owner = self;
    const std::string n = name != nullptr ? name : "";
    f->wal = n.size() > 4 && n.compare(n.size() - 4, 4, "-wal") == 0;
    self->methods_.iVersion = f->real()->pMethods->iVersion;
    f->base.pMethods = &self->methods_;
    return rc;
  }

  void Methods() {
    std::memset(&methods_, 0, sizeof methods_);
    methods_.iVersion = 3;
    methods_.xClose = [](sqlite3_file* f) {
      const int rc = F(f)->real()->pMethods->xClose(F(f)->real());
      return rc;
    };
    methods_.xRead = [](sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
      return F(f)->real()->pMethods->xRead(F(f)->real(), b, n, o);
    };
    methods_.xWrite = [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
      return F(f)->real()->pMethods->xWrite(F(f)->real(), b, n, o);
    };
    methods_.xTruncate = [](sqlite3_file* f, sqlite3_int64 s) {
      return F(f)->real()->pMethods->xTruncate(F(f)->real(), s);
    };
    methods_.xSync = [](sqlite3_file* f, int flags) {
      if (F(f)->wal) ++F(f)->owner->wal_syncs_;
      return F(f)->real()->pMethods->xSync(F(f)->real(), flags);
    };
    methods_.xFileSize = [](sqlite3_file* f, sqlite3_int64* s) {
      return F(f)->real()->pMethods->xFileSize(F(f)->real(), s);
    };
    methods_.xLock = [](sqlite3_file* f, int l) {
      return F(f)->real()->pMethods->xLock(F(f)->real(), l);
    };
    methods_.xUnlock = [](sqlite3_file* f, int l) {
      return F(f)->real()->pMethods->xUnlock(F(f)->real(), l);
    };
    methods_.xCheckReservedLock = [](sqlite3_file* f, int* r) {
      return F(f)->real()->pMethods->xCheckReservedLock(F(f)->real(), r);
    };
    methods_.xFileControl = [](sqlite3_file* f, int op, void* arg) {
      // The WAL handed out by SQLITE_FCNTL_JOURNAL_POINTER is this wrapper: counted too.
      return F(f)->real()->pMethods->xFileControl(F(f)->real(), op, arg);
    };
    methods_.xSectorSize = [](sqlite3_file* f) {
      return F(f)->real()->pMethods->xSectorSize(F(f)->real());
    };
    methods_.xDeviceCharacteristics = [](sqlite3_file* f) {
      return F(f)->real()->pMethods->xDeviceCharacteristics(F(f)->real());
    };
    methods_.xShmMap = [](sqlite3_file* f, int p, int s, int e, void volatile** out) {
      return F(f)->real()->pMethods->xShmMap(F(f)->real(), p, s, e, out);
    };
    methods_.xShmLock = [](sqlite3_file* f, int o, int n, int fl) {
      return F(f)->real()->pMethods->xShmLock(F(f)->real(), o, n, fl);
    };
    methods_.xShmBarrier = [](sqlite3_file* f) {
      F(f)->real()->pMethods->xShmBarrier(F(f)->real());
    };
    methods_.xShmUnmap = [](sqlite3_file* f, int d) {
      return F(f)->real()->pMethods->xShmUnmap(F(f)->real(), d);
    };
    methods_.xFetch = [](sqlite3_file* f, sqlite3_int64 o, int n, void** p) {
      return F(f)->real()->pMethods->xFetch(F(f)->real(), o, n, p);
    };
    methods_.xUnfetch = [](sqlite3_file* f, sqlite3_int64 o, void* p) {
      return F(f)->real()->pMethods->xUnfetch(F(f)->real(), o, p);
    };
  }

  sqlite3_vfs* real_ = nullptr;
  sqlite3_vfs vfs_{};
  sqlite3_io_methods methods_{};
  int wal_syncs_ = 0;
};

}  // namespace trainlet::testing

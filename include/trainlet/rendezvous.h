/* trainlet rendezvous: a key-value store with a barrier, for the ranks of one attempt of a job.
 *
 * A rank puts its own pairs (an address, say), joins a fence, and after the fence reads every
 * pair any rank of the attempt put before it. Puts stay in the calling process until the next
 * fence carries them to the node's agent; the agent merges its ranks' contributions and the
 * coordinator releases every node at once. After a fence the pairs are a file the library maps,
 * so a get of a published key is a memory read.
 *
 * C only, so any language with a C FFI can use it (Python: ctypes, see docs/rendezvous.md).
 * Link with -ltrainlet_rendezvous.
 *
 * Threading: a handle is used by one thread at a time; different handles are independent.
 * Errors: every call returns one of the TRAINLET_RDZV_* codes; trainlet_rdzv_last_error(h) says
 * why in words until the next call on that handle. Once a fence or get returns ABORTED (a rank of
 * the attempt exited, or the attempt ended) every later fence and get of the handle does too. */
#ifndef TRAINLET_RENDEZVOUS_H_
#define TRAINLET_RENDEZVOUS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRAINLET_RDZV_OK 0
#define TRAINLET_RDZV_TIMEOUT 1   /* the fence or get did not complete in time; may be retried */
#define TRAINLET_RDZV_ABORTED 2   /* the attempt's rendezvous failed: a rank exited, it ended */
#define TRAINLET_RDZV_DENIED 3    /* the agent does not know this job/attempt/rank/token */
#define TRAINLET_RDZV_INVALID 4   /* a bad argument, a missing env var, a call out of order */
#define TRAINLET_RDZV_NOT_FOUND 5 /* get with timeout 0 in non-blocking form: key not there */
#define TRAINLET_RDZV_TOO_SMALL 6 /* get: the value is larger than the buffer (see len) */
#define TRAINLET_RDZV_IO 7        /* the agent cannot be reached, or the snapshot is unreadable */

/* Largest key and value accepted by put. */
#define TRAINLET_RDZV_MAX_KEY 4096
#define TRAINLET_RDZV_MAX_VALUE (1024 * 1024)

typedef struct trainlet_rdzv trainlet_rdzv;

/* Opens a handle for this process's rank from the env the agent gives every worker:
 * TRAINLET_RENDEZVOUS_ENDPOINT, TRAINLET_RENDEZVOUS_TOKEN (else the file
 * TRAINLET_RENDEZVOUS_TOKEN_FILE names, as trainlet-step gives it), TRAINLET_JOB,
 * TRAINLET_ATTEMPT and TRAINLET_RANK. The endpoint is the agent's 0600 socket, or, for ranks
 * that run as another user than the agent, that user's own (docs/rendezvous.md, "Endpoints and
 * permissions"); one this process may not connect to fails the first fence or get with IO at
 * once, naming it, instead of waiting. On error *out is still set (free it with
 * trainlet_rdzv_close) when memory allowed, so last_error can say which variable is missing;
 * INVALID then. */
int trainlet_rdzv_open(trainlet_rdzv** out);

/* The same with explicit values; a process may open one handle per rank it speaks for (all of
 * them local ranks of the attempt on this node). Nothing is sent until the first fence or get
 * (or trainlet_rdzv_connect). */
int trainlet_rdzv_open_with(const char* endpoint, const char* token, const char* job,
                            uint32_t attempt, uint32_t rank, trainlet_rdzv** out);

/* Connects to the node's agent now, so that the first fence or get does not wait for it (the
 * connection completes in the background while the caller goes on). Optional: without it the
 * first fence or get connects. IO (a missing or forbidden endpoint) as that first call would
 * return; the handle stays usable, and that call tries again. */
int trainlet_rdzv_connect(trainlet_rdzv* h);

/* Stores key=value (len bytes, any bytes) for the next fence; a later put of the same key wins.
 * INVALID for an empty or oversized key or value, or while a fence is in flight. */
int trainlet_rdzv_put(trainlet_rdzv* h, const char* key, const void* value, size_t len);

/* Copies the value of `key` into buf (cap bytes) and its length into *len. Looks in this
 * handle's own puts, then the last fence's snapshot, then asks the agent, which answers when a
 * later fence publishes the key: timeout_ms < 0 waits while the attempt lives, 0 does not ask
 * (NOT_FOUND), > 0 waits that long (TIMEOUT). TOO_SMALL sets *len and copies nothing. */
int trainlet_rdzv_get(trainlet_rdzv* h, const char* key, void* buf, size_t cap, size_t* len,
                      int timeout_ms);

/* Barrier + all-gather: returns OK once every rank of the attempt joined this fence; then every
 * pair put before it, by any rank, can be read with get. timeout_ms < 0 waits while the attempt
 * lives. After TIMEOUT the fence is still joined: call trainlet_rdzv_fence_finish to keep
 * waiting. Equal to fence_start then fence_finish. */
int trainlet_rdzv_fence(trainlet_rdzv* h, int timeout_ms);

/* The two halves, so one thread can drive many handles: start sends this rank's puts and joins
 * the next fence without waiting; finish waits for the fence to complete. */
int trainlet_rdzv_fence_start(trainlet_rdzv* h);
int trainlet_rdzv_fence_finish(trainlet_rdzv* h, int timeout_ms);

/* For a caller's own event loop (trainlet-pmix waits on libpmix's): *fd is a descriptor that
 * becomes readable when a reply to this handle may have arrived (ZeroMQ's ZMQ_FD of its
 * connection), for poll/epoll/libevent to watch for reading, never to read or close. It can
 * signal with no reply there, and a reply can be there with no signal until the handle was last
 * used: after each wake-up, and once after fence_start, call fence_finish(h, 0), which takes the
 * reply if one is there (else TIMEOUT) and rearms the descriptor. It changes when the handle
 * reconnects (an agent restart, seen by fence_finish at most every second): ask again after
 * each fence_finish. IO before the handle is connected. */
int trainlet_rdzv_fd(trainlet_rdzv* h, int* fd);

/* Continues a rank's fence count in a new process: the next fence is fences_done + 1. For a
 * rank that is a sequence of processes (a shell script calling `trainletctl rendezvous`). INVALID
 * after this handle's first fence. */
int trainlet_rdzv_resume(trainlet_rdzv* h, uint64_t fences_done);

/* Tells the node's agent that this rank is aborting with `status` and `message` (NULL: none), as
 * PMIx_Abort does; the agent aborts the attempt's rendezvous on the node and names the call,
 * status and message in the rank's exit, which fails the attempt. Waits up to timeout_ms (< 0:
 * as long as it takes) for the agent to record it; OK once it has. For a process manager such
 * as trainlet-pmix, which sends it for its client rank before letting the rank exit. */
int trainlet_rdzv_abort(trainlet_rdzv* h, int status, const char* message, int timeout_ms);

/* Publishes key=value (len bytes) to every rank of the attempt now, not at the next fence (as
 * PMIx_Publish does): a get of the key on any node is answered once it arrives there, and later
 * fences carry it too. len 0 withdraws the key. Waits up to timeout_ms (< 0: as long as it takes)
 * for the node's agent to take it; OK once it has. Another rank's get may still wait a moment
 * for it (the coordinator forwards it to every node): give that get a timeout. */
int trainlet_rdzv_publish(trainlet_rdzv* h, const char* key, const void* value, size_t len,
                          int timeout_ms);

/* How many fences of this handle completed (the epoch of the snapshot it reads). */
uint64_t trainlet_rdzv_epoch(const trainlet_rdzv* h);

/* Every published pair, in key order, for get-all: *count pairs; key i and value i stay valid
 * until the next fence or close of the handle. INVALID before the first fence. */
int trainlet_rdzv_count(trainlet_rdzv* h, size_t* count);
int trainlet_rdzv_entry(trainlet_rdzv* h, size_t i, const char** key, size_t* key_len,
                        const void** value, size_t* value_len);

/* Why the last call on h failed ("" after a success). Owned by h. h == NULL: a static string. */
const char* trainlet_rdzv_last_error(const trainlet_rdzv* h);

/* The name of a return code, e.g. "ABORTED". */
const char* trainlet_rdzv_code_name(int code);

/* Frees the handle and its mapping. NULL is fine. */
void trainlet_rdzv_close(trainlet_rdzv* h);

#ifdef __cplusplus
}
#endif

#endif /* TRAINLET_RENDEZVOUS_H_ */

/*
 * fake_nvml.c - a stub libnvidia-ml.so.1 for tests on machines without a GPU.
 *
 * Why: the collector (gpu_preflight.backends.nvml) must be tested through the REAL
 * pynvml bindings, because most NVML bugs live in the ctypes layer (struct layouts,
 * versioned symbols, error classes). Mocking pynvml would test nothing of that. This
 * library exports the NVML C symbols that pynvml reaches and answers them from a data
 * file, so a test can replay a real dump and inject faults by editing values.
 *
 * Build: gcc -shared -fPIC -O1 -Wall -o libnvidia-ml.so.1 fake_nvml.c
 * Use:   LD_LIBRARY_PATH=<dir of the .so> FAKE_NVML_DATA=<data file> python ...
 *
 * Data file (written by tests/nvml_stub/stub.py, easy to write by hand): one record a
 * line, tokens separated by blanks, '#' starts a comment. String values are
 * percent-encoded (a space is %20, '%' is %25, the empty string is %00) so that no
 * token ever contains a blank.
 *
 *   init <rc>                          nvmlInit* returns rc (e.g. 9 = driver not loaded)
 *   lost <dev> [<handle>]              device is lost: every call for it returns 15; with
 *                                      <handle> = 1, nvmlDeviceGetHandleByIndex fails too
 *   sys <symbol> <rc> [values...]      a call without a device (driver version, count)
 *   dev <idx> <key> <rc> [values...]   a call for one device
 *   seq <idx> <key> <width> values...  a device call whose answer changes with each call:
 *                                      the values are cut into answers of <width> values
 *                                      and the n-th call returns the n-th answer (then the
 *                                      last one for ever), so a test can play a series
 *                                      (clocks under load, a temperature climbing) through
 *                                      the real pynvml. A seq record wins over dev records
 *                                      of the same key, whatever the order.
 *
 * <key> is the C symbol name, followed by "/<arg>" for each enum/index argument in the
 * order of the C prototype, e.g. nvmlDeviceGetClockInfo/2, nvmlDeviceGetTotalEccErrors/1/0,
 * nvmlDeviceGetNvLinkErrorCounter/<link>/<counter>, nvmlDeviceGetTemperature/0. Field
 * values are "field/<fieldId> <nvmlReturn> [<valueType> <value>]". When <rc> is not 0 the
 * call returns it and the values are not needed. A call with no record returns
 * NVML_ERROR_NOT_SUPPORTED (3); nvmlDeviceGetFieldValues succeeds without a record of its
 * own when the device has at least one field record, and fields without a record come
 * back with nvmlReturn 3. When a key appears twice the LAST record wins, so a fault can
 * be injected by appending a line.
 *
 * Values per call (all integers decimal; unsigned 64-bit allowed):
 *   string getters ................ one string
 *   scalar getters ................ one integer
 *   MigMode, EccMode .............. current pending
 *   PowerManagementLimitConstraints min max
 *   CudaComputeCapability ......... major minor
 *   RemappedRows .................. corrRows uncRows isPending failureOccurred
 *   MemoryInfo .................... total free used
 *   UtilizationRates .............. gpu memory
 *   PciInfo_v3 / NvLinkRemotePciInfo_v2
 *                                   busIdLegacy domain bus device pciDeviceId
 *                                   pciSubSystemId busId
 *   ComputeRunningProcesses_v3 .... 4 per process: pid usedGpuMemory gpuInstanceId
 *                                   computeInstanceId (none = no process)
 *   RetiredPages/<cause> .......... one page address per value (none = no page)
 *
 * Environment:
 *   FAKE_NVML_DATA     path of the data file (required; init fails with 999 without it)
 *   FAKE_NVML_HANG     "<dev>:<function>[:<seconds>][,...]": that call sleeps before it
 *                      answers, to test callers' timeouts. <dev> is a device index,
 *                      "*" (any device) or "sys" (calls without a device, including
 *                      nvmlInit*, nvmlShutdown and nvmlDeviceGetCount_v2). <function> is
 *                      the symbol name; a name without its "_vN" suffix matches too
 *                      (nvmlDeviceGetHandleByIndex matches nvmlDeviceGetHandleByIndex_v2).
 *   FAKE_NVML_HANG_S   how long a hung call sleeps when its item has no <seconds>
 *                      (integer, default 600)
 *   FAKE_NVML_SLOW     "<dev>:<function>:<seconds>[,...]": that device call writes its
 *                      answer, then sleeps before returning (a slow GPU; also exposes
 *                      callers that share output buffers between threads)
 *
 * Handles are addresses inside a static array, so a handle encodes the device index and
 * a foreign pointer is rejected with NVML_ERROR_INVALID_ARGUMENT.
 *
 * Struct layouts are those of pynvml 13.615.71 (checked by _Static_assert below).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

/* ---- NVML types (ABI-compatible subset of nvml.h) --------------------------------- */

typedef int nvmlReturn_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_UNKNOWN 999

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    unsigned int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* The sizes ctypes computes for pynvml's structures; a mismatch corrupts memory. */
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_v3_t layout");
_Static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t layout");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
_Static_assert(offsetof(nvmlFieldValue_t, value) == 32, "nvmlFieldValue_t.value offset");

#define EXPORT __attribute__((visibility("default")))

/* ---- state -------------------------------------------------------------------------- */

#define MAX_DEVICES 64
#define MAX_HANGS 16

typedef struct {
    int dev; /* -1: system record */
    char *key;
    nvmlReturn_t rc;
    int nvals;
    char **vals;
    int width; /* > 0: a seq record, answers of `width` values played one per call */
    int calls; /* seq records: calls answered so far (under g_seq_lock) */
} entry_t;

typedef struct {
    int dev; /* device index, -1: system calls, -2: any device */
    char name[128];
    double seconds;
} inject_t;

/* Tables of an earlier nvmlInit are never freed: a hung thread of a caller may still be
 * reading them after nvmlShutdown, and a test process is short-lived. */
static entry_t *g_entries;
static size_t g_nentries;
static nvmlReturn_t g_init_rc;
static int g_refcount;
static unsigned char g_lost[MAX_DEVICES];     /* 0: fine, 1: lost, 2: lost incl. handle */
static unsigned char g_has_fields[MAX_DEVICES];
static char g_handles[MAX_DEVICES];           /* handle i == &g_handles[i] */
static inject_t g_hangs[MAX_HANGS]; /* sleep before answering */
static int g_nhangs;
static inject_t g_slows[MAX_HANGS]; /* sleep after answering */
static int g_nslows;

__attribute__((format(printf, 1, 2))) static void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fake_nvml: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- data file ---------------------------------------------------------------------- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode %XX in place; a malformed escape is kept literally. */
static void percent_decode(char *s)
{
    char *out = s;
    for (char *in = s; *in; ) {
        if (in[0] == '%' && in[1] && in[2] && hexval((unsigned char)in[1]) >= 0 &&
            hexval((unsigned char)in[2]) >= 0) {
            *out++ = (char)(hexval((unsigned char)in[1]) * 16 + hexval((unsigned char)in[2]));
            in += 3;
        } else {
            *out++ = *in++;
        }
    }
    *out = '\0';
}

static int parse_int(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end) return 0;
    *out = v;
    return 1;
}

static size_t g_cap; /* capacity of g_entries; reset with it on every (re)load */

static void add_entry(int dev, const char *key, nvmlReturn_t rc, int nvals, char **vals)
{
    size_t cap = g_cap;
    if (g_nentries == cap) {
        size_t ncap = cap ? cap * 2 : 256;
        entry_t *n = realloc(g_entries, ncap * sizeof *n);
        if (!n) { warn("out of memory"); return; }
        g_entries = n;
        g_cap = ncap;
    }
    entry_t *e = &g_entries[g_nentries];
    e->dev = dev;
    e->key = strdup(key);
    e->rc = rc;
    e->nvals = nvals;
    e->width = 0;
    e->calls = 0;
    e->vals = calloc((size_t)(nvals > 0 ? nvals : 1), sizeof(char *));
    if (!e->key || !e->vals) { warn("out of memory"); return; }
    for (int i = 0; i < nvals; i++) e->vals[i] = strdup(vals[i]);
    if (dev >= 0 && dev < MAX_DEVICES && strncmp(key, "field/", 6) == 0) g_has_fields[dev] = 1;
    g_nentries++;
}

/* One record; malformed ones are reported on stderr and skipped. */
static void parse_line(char *line, long lineno)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    size_t cap = 16;
    int n = 0;
    char **tok = malloc(cap * sizeof *tok);
    if (!tok) return;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if ((size_t)n == cap) {
            char **nt = realloc(tok, cap * 2 * sizeof *tok);
            if (!nt) { free(tok); return; }
            tok = nt;
            cap *= 2;
        }
        percent_decode(t);
        tok[n++] = t;
    }
    long a = 0, b = 0, rc = 0;
    if (n == 0) {
        /* blank or comment */
    } else if (strcmp(tok[0], "init") == 0 && n == 2 && parse_int(tok[1], &rc)) {
        g_init_rc = (nvmlReturn_t)rc;
    } else if (strcmp(tok[0], "lost") == 0 && (n == 2 || n == 3) && parse_int(tok[1], &a) &&
               a >= 0 && a < MAX_DEVICES && (n == 2 || parse_int(tok[2], &b))) {
        g_lost[a] = b ? 2 : 1;
    } else if (strcmp(tok[0], "sys") == 0 && n >= 3 && parse_int(tok[2], &rc)) {
        add_entry(-1, tok[1], (nvmlReturn_t)rc, n - 3, tok + 3);
    } else if (strcmp(tok[0], "dev") == 0 && n >= 4 && parse_int(tok[1], &a) && a >= 0 &&
               a < MAX_DEVICES && parse_int(tok[3], &rc)) {
        add_entry((int)a, tok[2], (nvmlReturn_t)rc, n - 4, tok + 4);
    } else if (strcmp(tok[0], "seq") == 0 && n >= 5 && parse_int(tok[1], &a) && a >= 0 &&
               a < MAX_DEVICES && parse_int(tok[3], &b) && b > 0 && (n - 4) % b == 0) {
        add_entry((int)a, tok[2], NVML_SUCCESS, n - 4, tok + 4);
        g_entries[g_nentries - 1].width = (int)b;
    } else {
        warn("%s: malformed record on line %ld, ignored", getenv("FAKE_NVML_DATA"), lineno);
    }
    free(tok);
}

static int load_data(void)
{
    const char *path = getenv("FAKE_NVML_DATA");
    if (!path || !*path) {
        warn("FAKE_NVML_DATA is not set; nvmlInit fails with NVML_ERROR_UNKNOWN");
        return 0;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        warn("cannot open FAKE_NVML_DATA=%s: %s", path, strerror(errno));
        return 0;
    }
    g_entries = NULL; /* see the note on the tables above */
    g_nentries = 0;
    g_cap = 0;
    g_init_rc = NVML_SUCCESS;
    memset(g_lost, 0, sizeof g_lost);
    memset(g_has_fields, 0, sizeof g_has_fields);
    char *line = NULL;
    size_t len = 0;
    long lineno = 0;
    while (getline(&line, &len, f) >= 0) parse_line(line, ++lineno);
    free(line);
    fclose(f);
    return 1;
}

/* Parse "<dev>:<function>[:<seconds>]" items of env var `name` into `out`. */
static int parse_injections(const char *name, double default_s, inject_t *out)
{
    int n = 0;
    const char *spec = getenv(name);
    if (!spec || !*spec) return 0;
    char *copy = strdup(spec);
    if (!copy) return 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && n < MAX_HANGS; item = strtok_r(NULL, ",", &save)) {
        char *fn = strchr(item, ':');
        long d;
        if (!fn) { warn("bad %s item %s (want <dev>:<function>[:<seconds>])", name, item); continue; }
        *fn++ = '\0';
        char *secs = strchr(fn, ':');
        if (secs) *secs++ = '\0';
        inject_t *h = &out[n];
        if (strcmp(item, "*") == 0) h->dev = -2;
        else if (strcmp(item, "sys") == 0) h->dev = -1;
        else if (parse_int(item, &d) && d >= 0) h->dev = (int)d;
        else { warn("bad %s device %s", name, item); continue; }
        snprintf(h->name, sizeof h->name, "%s", fn);
        h->seconds = secs ? strtod(secs, NULL) : default_s;
        n++;
    }
    free(copy);
    return n;
}

static void load_injections(void)
{
    long s = 600;
    const char *hang_s = getenv("FAKE_NVML_HANG_S");
    if (hang_s && !(parse_int(hang_s, &s) && s >= 0)) s = 600;
    g_nhangs = parse_injections("FAKE_NVML_HANG", (double)s, g_hangs);
    g_nslows = parse_injections("FAKE_NVML_SLOW", 1.0, g_slows);
}

/* ---- lookups ------------------------------------------------------------------------ */

static pthread_mutex_t g_seq_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread entry_t t_answer; /* the current answer of a seq record, per calling thread */

/* The record for (dev, key): a seq record's next answer if there is one, else the last
 * dev/sys record. */
static const entry_t *find(int dev, const char *key)
{
    const entry_t *last = NULL;
    for (size_t i = g_nentries; i-- > 0; ) {
        entry_t *e = &g_entries[i];
        if (e->dev != dev || strcmp(e->key, key) != 0) continue;
        if (e->width > 0) {
            pthread_mutex_lock(&g_seq_lock);
            int answers = e->nvals / e->width;
            int at = e->calls < answers - 1 ? e->calls : answers - 1;
            e->calls++;
            pthread_mutex_unlock(&g_seq_lock);
            t_answer = *e;
            t_answer.vals = e->vals + (size_t)at * (size_t)e->width;
            t_answer.nvals = e->width;
            return &t_answer;
        }
        if (!last) last = e;
    }
    return last;
}

/* "name" matches "name" and "name_v<digits>". */
static int name_matches(const char *spec, const char *symbol)
{
    size_t n = strlen(spec);
    if (strncmp(spec, symbol, n) != 0) return 0;
    const char *rest = symbol + n;
    if (!*rest) return 1;
    if (rest[0] != '_' || rest[1] != 'v' || !rest[2]) return 0;
    for (rest += 2; *rest; rest++)
        if (!isdigit((unsigned char)*rest)) return 0;
    return 1;
}

static void sleep_if(const inject_t *list, int n, int dev, const char *symbol, const char *what)
{
    for (int i = 0; i < n; i++) {
        const inject_t *h = &list[i];
        int dev_ok = h->dev == dev || (h->dev == -2 && dev >= 0);
        if (!dev_ok || !name_matches(h->name, symbol)) continue;
        if (dev >= 0)
            fprintf(stderr, "fake_nvml: %s on device %d %s for %g s\n", symbol, dev, what, h->seconds);
        else
            fprintf(stderr, "fake_nvml: %s %s for %g s\n", symbol, what, h->seconds);
        struct timespec left;
        left.tv_sec = (time_t)h->seconds;
        left.tv_nsec = (long)((h->seconds - (double)left.tv_sec) * 1e9);
        while (nanosleep(&left, &left) != 0 && errno == EINTR) {
        }
        return;
    }
}

static void maybe_hang(int dev, const char *symbol) { sleep_if(g_hangs, g_nhangs, dev, symbol, "hangs"); }

static int handle_index(nvmlDevice_t h)
{
    const char *p = (const char *)h;
    if (p < g_handles || p >= g_handles + MAX_DEVICES) return -1;
    return (int)(p - g_handles);
}

/* Common entry of every per-device call: validity, hang injection, lost devices. */
static nvmlReturn_t begin(nvmlDevice_t h, const char *symbol, int *dev)
{
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    int d = handle_index(h);
    if (d < 0) return NVML_ERROR_INVALID_ARGUMENT;
    maybe_hang(d, symbol);
    if (g_lost[d]) return NVML_ERROR_GPU_IS_LOST;
    *dev = d;
    return NVML_SUCCESS;
}

/* Common exit of every per-device call, after its outputs are written: FAKE_NVML_SLOW. */
static nvmlReturn_t finish(nvmlDevice_t h, const char *symbol, nvmlReturn_t rc)
{
    int d = handle_index(h);
    if (d >= 0) sleep_if(g_slows, g_nslows, d, symbol, "is slow");
    return rc;
}

/* The record for (dev, key) with at least `need` values, or the rc the call returns. */
static nvmlReturn_t record(int dev, const char *key, int need, const entry_t **out)
{
    const entry_t *e = find(dev, key);
    if (!e) return NVML_ERROR_NOT_SUPPORTED;
    if (e->rc != NVML_SUCCESS) return e->rc;
    if (e->nvals < need) {
        fprintf(stderr, "fake_nvml: %s for device %d needs %d values, has %d\n", key, dev, need,
                e->nvals);
        return NVML_ERROR_UNKNOWN;
    }
    *out = e;
    return NVML_SUCCESS;
}

static unsigned long long to_u64(const char *s)
{
    if (s[0] == '-') return (unsigned long long)strtoll(s, NULL, 10);
    return strtoull(s, NULL, 10);
}

static nvmlReturn_t copy_str(const char *src, char *dst, unsigned int len)
{
    size_t n = strlen(src);
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (n + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, n + 1);
    return NVML_SUCCESS;
}

/* Fill `n` unsigned 64-bit outputs (any may be NULL only if n is 0). */
static nvmlReturn_t dev_u64s(nvmlDevice_t h, const char *symbol, const char *key, int n,
                             unsigned long long *out)
{
    int dev;
    const entry_t *e;
    nvmlReturn_t rc = begin(h, symbol, &dev);
    if (rc == NVML_SUCCESS) rc = record(dev, key, n, &e);
    if (rc != NVML_SUCCESS) return rc;
    for (int i = 0; i < n; i++) out[i] = to_u64(e->vals[i]);
    return NVML_SUCCESS;
}

static nvmlReturn_t dev_u32(nvmlDevice_t h, const char *symbol, const char *key, unsigned int *out)
{
    unsigned long long v;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = dev_u64s(h, symbol, key, 1, &v);
    if (rc == NVML_SUCCESS) *out = (unsigned int)v;
    return finish(h, symbol, rc);
}

static nvmlReturn_t dev_u32_pair(nvmlDevice_t h, const char *symbol, unsigned int *a, unsigned int *b)
{
    unsigned long long v[2];
    if (!a || !b) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = dev_u64s(h, symbol, symbol, 2, v);
    if (rc == NVML_SUCCESS) { *a = (unsigned int)v[0]; *b = (unsigned int)v[1]; }
    return finish(h, symbol, rc);
}

static nvmlReturn_t dev_u64(nvmlDevice_t h, const char *symbol, const char *key, unsigned long long *out)
{
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    return finish(h, symbol, dev_u64s(h, symbol, key, 1, out));
}

static nvmlReturn_t dev_str(nvmlDevice_t h, const char *symbol, char *buf, unsigned int len)
{
    int dev;
    const entry_t *e;
    nvmlReturn_t rc = begin(h, symbol, &dev);
    if (rc == NVML_SUCCESS) rc = record(dev, symbol, 1, &e);
    if (rc == NVML_SUCCESS) rc = copy_str(e->vals[0], buf, len);
    return finish(h, symbol, rc);
}

static nvmlReturn_t fill_pci(const entry_t *e, nvmlPciInfo_t *pci)
{
    memset(pci, 0, sizeof *pci);
    if (copy_str(e->vals[0], pci->busIdLegacy, sizeof pci->busIdLegacy) != NVML_SUCCESS ||
        copy_str(e->vals[6], pci->busId, sizeof pci->busId) != NVML_SUCCESS)
        return NVML_ERROR_UNKNOWN;
    pci->domain = (unsigned int)to_u64(e->vals[1]);
    pci->bus = (unsigned int)to_u64(e->vals[2]);
    pci->device = (unsigned int)to_u64(e->vals[3]);
    pci->pciDeviceId = (unsigned int)to_u64(e->vals[4]);
    pci->pciSubSystemId = (unsigned int)to_u64(e->vals[5]);
    return NVML_SUCCESS;
}

/* ---- init, errors, system ----------------------------------------------------------- */

static nvmlReturn_t do_init(const char *symbol)
{
    load_injections();
    maybe_hang(-1, symbol);
    if (g_refcount > 0) { g_refcount++; return NVML_SUCCESS; }
    if (!load_data()) return NVML_ERROR_UNKNOWN;
    if (g_init_rc != NVML_SUCCESS) return g_init_rc;
    g_refcount = 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init("nvmlInitWithFlags"); }
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
EXPORT nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    maybe_hang(-1, "nvmlShutdown"); /* real NVML can block here behind a call stuck in the driver */
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    g_refcount--;
    return NVML_SUCCESS;
}

/* The strings libnvidia-ml returns (pynvml's NVMLError table mirrors them). */
EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt Request Issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request.";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 20: return "Insufficient Memory";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t sys_record(const char *symbol, int need, const entry_t **e)
{
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    maybe_hang(-1, symbol);
    return record(-1, symbol, need, e);
}

static nvmlReturn_t sys_str(const char *symbol, char *buf, unsigned int len)
{
    const entry_t *e;
    nvmlReturn_t rc = sys_record(symbol, 1, &e);
    return rc != NVML_SUCCESS ? rc : copy_str(e->vals[0], buf, len);
}

static nvmlReturn_t sys_int(const char *symbol, const char *key, int *out)
{
    const entry_t *e;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    maybe_hang(-1, symbol);
    nvmlReturn_t rc = record(-1, key, 1, &e);
    if (rc == NVML_SUCCESS) *out = (int)to_u64(e->vals[0]);
    return rc;
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return sys_str("nvmlSystemGetDriverVersion", version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    return sys_str("nvmlSystemGetNVMLVersion", version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    return sys_int("nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion", v);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    return sys_int("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    int v;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = sys_int("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount_v2", &v);
    if (rc == NVML_SUCCESS) *count = (unsigned int)v;
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= MAX_DEVICES) return NVML_ERROR_INVALID_ARGUMENT;
    maybe_hang((int)index, "nvmlDeviceGetHandleByIndex_v2");
    const entry_t *count = find(-1, "nvmlDeviceGetCount_v2");
    if (count && count->rc == NVML_SUCCESS && count->nvals >= 1 && index >= to_u64(count->vals[0]))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (g_lost[index] == 2) return NVML_ERROR_GPU_IS_LOST;
    const entry_t *e = find((int)index, "nvmlDeviceGetHandleByIndex_v2");
    if (e && e->rc != NVML_SUCCESS) return e->rc;
    *device = (nvmlDevice_t)(void *)&g_handles[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* ---- device: strings ---------------------------------------------------------------- */

#define STRING_GETTER(sym)                                                                  \
    EXPORT nvmlReturn_t sym(nvmlDevice_t d, char *buf, unsigned int len)                    \
    {                                                                                       \
        return dev_str(d, #sym, buf, len);                                                  \
    }

STRING_GETTER(nvmlDeviceGetName)
STRING_GETTER(nvmlDeviceGetUUID)
STRING_GETTER(nvmlDeviceGetSerial)
STRING_GETTER(nvmlDeviceGetBoardPartNumber)
STRING_GETTER(nvmlDeviceGetVbiosVersion)
STRING_GETTER(nvmlDeviceGetInforomImageVersion)

/* No length argument: the caller's buffer is NVML_GSP_FIRMWARE_VERSION_BUF_SIZE (64). */
EXPORT nvmlReturn_t nvmlDeviceGetGspFirmwareVersion(nvmlDevice_t d, char *version)
{
    return dev_str(d, "nvmlDeviceGetGspFirmwareVersion", version, 64);
}

/* ---- device: scalars ---------------------------------------------------------------- */

#define U32_GETTER(sym)                                                                     \
    EXPORT nvmlReturn_t sym(nvmlDevice_t d, unsigned int *out) { return dev_u32(d, #sym, #sym, out); }

U32_GETTER(nvmlDeviceGetPowerUsage)
U32_GETTER(nvmlDeviceGetEnforcedPowerLimit)
U32_GETTER(nvmlDeviceGetPowerManagementLimit)
U32_GETTER(nvmlDeviceGetPowerManagementDefaultLimit)
U32_GETTER(nvmlDeviceGetPersistenceMode) /* nvmlEnableState_t* */
U32_GETTER(nvmlDeviceGetComputeMode)     /* nvmlComputeMode_t* */
U32_GETTER(nvmlDeviceGetRetiredPagesPendingStatus)
U32_GETTER(nvmlDeviceGetCurrPcieLinkGeneration)
U32_GETTER(nvmlDeviceGetMaxPcieLinkGeneration)
U32_GETTER(nvmlDeviceGetGpuMaxPcieLinkGeneration)
U32_GETTER(nvmlDeviceGetCurrPcieLinkWidth)
U32_GETTER(nvmlDeviceGetMaxPcieLinkWidth)
U32_GETTER(nvmlDeviceGetPcieReplayCounter)
U32_GETTER(nvmlDeviceGetPerformanceState) /* nvmlPstates_t* */
U32_GETTER(nvmlDeviceGetArchitecture)     /* nvmlDeviceArchitecture_t* */
U32_GETTER(nvmlDeviceGetIndex)
U32_GETTER(nvmlDeviceGetMinorNumber)
U32_GETTER(nvmlDeviceGetModuleId)

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, int *node)
{
    return dev_u32(d, "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetNumaNodeId", (unsigned int *)node);
}

/* The "EventReasons" names replaced "ThrottleReasons"; NVML exports both. */
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
    return dev_u64(d, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksEventReasons", r);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r)
{
    return dev_u64(d, "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetCurrentClocksEventReasons", r);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
    return dev_u64(d, "nvmlDeviceGetSupportedClocksEventReasons", "nvmlDeviceGetSupportedClocksEventReasons", r);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r)
{
    return dev_u64(d, "nvmlDeviceGetSupportedClocksThrottleReasons", "nvmlDeviceGetSupportedClocksEventReasons", r);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, unsigned int sensor, unsigned int *temp)
{
    char key[96];
    snprintf(key, sizeof key, "nvmlDeviceGetTemperature/%u", sensor);
    return dev_u32(d, "nvmlDeviceGetTemperature", key, temp);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, unsigned int threshold, unsigned int *temp)
{
    char key[96];
    snprintf(key, sizeof key, "nvmlDeviceGetTemperatureThreshold/%u", threshold);
    return dev_u32(d, "nvmlDeviceGetTemperatureThreshold", key, temp);
}

#define CLOCK_GETTER(sym)                                                                   \
    EXPORT nvmlReturn_t sym(nvmlDevice_t d, unsigned int type, unsigned int *clock)         \
    {                                                                                       \
        char key[96];                                                                       \
        snprintf(key, sizeof key, #sym "/%u", type);                                        \
        return dev_u32(d, #sym, key, clock);                                                \
    }

CLOCK_GETTER(nvmlDeviceGetClockInfo)
CLOCK_GETTER(nvmlDeviceGetMaxClockInfo)
CLOCK_GETTER(nvmlDeviceGetApplicationsClock)

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, unsigned int errorType,
                                                unsigned int counterType, unsigned long long *count)
{
    char key[96];
    snprintf(key, sizeof key, "nvmlDeviceGetTotalEccErrors/%u/%u", errorType, counterType);
    return dev_u64(d, "nvmlDeviceGetTotalEccErrors", key, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t d, unsigned int errorType,
                                                    unsigned int counterType, unsigned int location,
                                                    unsigned long long *count)
{
    char key[96];
    snprintf(key, sizeof key, "nvmlDeviceGetMemoryErrorCounter/%u/%u/%u", errorType, counterType, location);
    return dev_u64(d, "nvmlDeviceGetMemoryErrorCounter", key, count);
}

/* ---- device: pairs and small structs ------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending)
{
    return dev_u32_pair(d, "nvmlDeviceGetMigMode", cur, pending);
}

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending)
{
    return dev_u32_pair(d, "nvmlDeviceGetEccMode", cur, pending);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t d, unsigned int *lo, unsigned int *hi)
{
    return dev_u32_pair(d, "nvmlDeviceGetPowerManagementLimitConstraints", lo, hi);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    return dev_u32_pair(d, "nvmlDeviceGetCudaComputeCapability", (unsigned int *)major, (unsigned int *)minor);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
                                              unsigned int *pending, unsigned int *failure)
{
    unsigned long long v[4];
    if (!corr || !unc || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = dev_u64s(d, "nvmlDeviceGetRemappedRows", "nvmlDeviceGetRemappedRows", 4, v);
    if (rc == NVML_SUCCESS) {
        *corr = (unsigned int)v[0];
        *unc = (unsigned int)v[1];
        *pending = (unsigned int)v[2];
        *failure = (unsigned int)v[3];
    }
    return finish(d, "nvmlDeviceGetRemappedRows", rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *mem)
{
    unsigned long long v[3];
    if (!mem) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = dev_u64s(d, "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", 3, v);
    if (rc == NVML_SUCCESS) {
        mem->total = v[0];
        mem->free = v[1];
        mem->used = v[2];
    }
    return finish(d, "nvmlDeviceGetMemoryInfo", rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *util)
{
    unsigned long long v[2];
    if (!util) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = dev_u64s(d, "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetUtilizationRates", 2, v);
    if (rc == NVML_SUCCESS) {
        util->gpu = (unsigned int)v[0];
        util->memory = (unsigned int)v[1];
    }
    return finish(d, "nvmlDeviceGetUtilizationRates", rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
    int dev;
    const entry_t *e;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = begin(d, "nvmlDeviceGetPciInfo_v3", &dev);
    if (rc == NVML_SUCCESS) rc = record(dev, "nvmlDeviceGetPciInfo_v3", 7, &e);
    return finish(d, "nvmlDeviceGetPciInfo_v3", rc != NVML_SUCCESS ? rc : fill_pci(e, pci));
}

/* ---- device: lists ------------------------------------------------------------------ */

/* Size query (count 0 / NULL array) and fill, with NVML's INSUFFICIENT_SIZE protocol. */
static nvmlReturn_t processes(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos)
{
    int dev;
    const entry_t *e;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = begin(d, "nvmlDeviceGetComputeRunningProcesses_v3", &dev);
    if (rc == NVML_SUCCESS) rc = record(dev, "nvmlDeviceGetComputeRunningProcesses_v3", 0, &e);
    if (rc != NVML_SUCCESS) return rc;
    unsigned int n = (unsigned int)(e->nvals / 4);
    if (*count < n || (n > 0 && !infos)) { *count = n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    for (unsigned int i = 0; i < n; i++) {
        memset(&infos[i], 0, sizeof infos[i]);
        infos[i].pid = (unsigned int)to_u64(e->vals[4 * i]);
        infos[i].usedGpuMemory = to_u64(e->vals[4 * i + 1]);
        infos[i].gpuInstanceId = (unsigned int)to_u64(e->vals[4 * i + 2]);
        infos[i].computeInstanceId = (unsigned int)to_u64(e->vals[4 * i + 3]);
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return finish(d, "nvmlDeviceGetComputeRunningProcesses_v3", processes(d, count, infos));
}

static nvmlReturn_t retired_pages(nvmlDevice_t d, unsigned int cause, unsigned int *count,
                                  unsigned long long *addresses)
{
    int dev;
    const entry_t *e;
    char key[96];
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(key, sizeof key, "nvmlDeviceGetRetiredPages/%u", cause);
    nvmlReturn_t rc = begin(d, "nvmlDeviceGetRetiredPages", &dev);
    if (rc == NVML_SUCCESS) rc = record(dev, key, 0, &e);
    if (rc != NVML_SUCCESS) return rc;
    unsigned int n = (unsigned int)e->nvals;
    if (*count < n || (n > 0 && !addresses)) { *count = n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    for (unsigned int i = 0; i < n; i++) addresses[i] = to_u64(e->vals[i]);
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, unsigned int cause, unsigned int *count,
                                              unsigned long long *addresses)
{
    return finish(d, "nvmlDeviceGetRetiredPages", retired_pages(d, cause, count, addresses));
}

/* ---- device: NVLink ----------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, unsigned int *active)
{
    char key[96];
    snprintf(key, sizeof key, "nvmlDeviceGetNvLinkState/%u", link);
    return dev_u32(d, "nvmlDeviceGetNvLinkState", key, active);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t d, unsigned int link, unsigned int *version)
{
    char key[96];
    snprintf(key, sizeof key, "nvmlDeviceGetNvLinkVersion/%u", link);
    return dev_u32(d, "nvmlDeviceGetNvLinkVersion", key, version);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned int link, unsigned int counter,
                                                    unsigned long long *value)
{
    char key[96];
    snprintf(key, sizeof key, "nvmlDeviceGetNvLinkErrorCounter/%u/%u", link, counter);
    return dev_u64(d, "nvmlDeviceGetNvLinkErrorCounter", key, value);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t *pci)
{
    int dev;
    const entry_t *e;
    char key[96];
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(key, sizeof key, "nvmlDeviceGetNvLinkRemotePciInfo_v2/%u", link);
    nvmlReturn_t rc = begin(d, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &dev);
    if (rc == NVML_SUCCESS) rc = record(dev, key, 7, &e);
    return finish(d, "nvmlDeviceGetNvLinkRemotePciInfo_v2", rc != NVML_SUCCESS ? rc : fill_pci(e, pci));
}

/* ---- device: field values ----------------------------------------------------------- */

static void fill_field(int dev, nvmlFieldValue_t *fv, long long now_us)
{
    char key[64];
    snprintf(key, sizeof key, "field/%u", fv->fieldId);
    const entry_t *e = find(dev, key);
    memset(&fv->value, 0, sizeof fv->value);
    fv->timestamp = now_us;
    fv->latencyUsec = 0;
    fv->valueType = 0;
    if (!e) { fv->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; return; }
    if (e->rc != NVML_SUCCESS) { fv->nvmlReturn = e->rc; return; }
    if (e->nvals < 2) {
        fprintf(stderr, "fake_nvml: %s for device %d needs <valueType> <value>\n", key, dev);
        fv->nvmlReturn = NVML_ERROR_UNKNOWN;
        return;
    }
    unsigned int type = (unsigned int)to_u64(e->vals[0]);
    const char *v = e->vals[1];
    fv->valueType = type;
    fv->nvmlReturn = NVML_SUCCESS;
    switch (type) {
    case 0: fv->value.dVal = strtod(v, NULL); break;
    case 1: fv->value.uiVal = (unsigned int)to_u64(v); break;
    case 2: fv->value.ulVal = (unsigned long)to_u64(v); break;
    case 4: fv->value.sllVal = strtoll(v, NULL, 10); break;
    case 5: fv->value.siVal = (int)strtol(v, NULL, 10); break;
    case 6: fv->value.usVal = (unsigned short)to_u64(v); break;
    default: fv->value.ullVal = to_u64(v); break;
    }
}

static nvmlReturn_t field_values(nvmlDevice_t d, int count, nvmlFieldValue_t *values)
{
    int dev;
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = begin(d, "nvmlDeviceGetFieldValues", &dev);
    if (rc != NVML_SUCCESS) return rc;
    const entry_t *call = find(dev, "nvmlDeviceGetFieldValues");
    if (call && call->rc != NVML_SUCCESS) return call->rc;
    if (!call && !g_has_fields[dev]) return NVML_ERROR_NOT_SUPPORTED;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now_us = (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
    for (int i = 0; i < count; i++) fill_field(dev, &values[i], now_us);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values)
{
    return finish(d, "nvmlDeviceGetFieldValues", field_values(d, count, values));
}

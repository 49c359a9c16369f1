/* The SIGIL decoder's frame loop for the common case, compiled: DATA frames of one stream, in sequence, whose
 * payload holds only tokens and well-nested mode and chunk opcodes. Python's decoder (decoder.py) calls it first on
 * its buffered bytes and handles everything else itself — a HELLO, another stream, a gap, a damaged frame, a reset —
 * so this loop never decides anything the Python decoder would decide differently: it stops before any frame it
 * does not fully accept, leaving that frame untouched (a frame is validated before it changes any state).
 *
 * run(buffer, start, stream, expected, mode, hot, max_payload, tokens, out, content, modes)
 *   -> (position after the last frame taken, next expected seq, mode, frames taken)
 * ``tokens`` is the stream's buffered token list (appended to and emptied in place), ``out`` the list of chunks,
 * ``content`` the Content class and ``modes`` the Mode members by value.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FRAME_START 0xF0
#define VERSION 0x01
#define KIND_DATA 0x02
#define LONG_TOKEN 0x7F
#define SHORT_MAX 0xBF
#define CHUNK_END 0xC0
#define FLUSH 0xC7
#define MAX_VARINT_BYTES 5

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32c_table(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* SSE 4.2's crc32 instruction computes this very CRC (Castagnoli, reflected): eight bytes a step instead of one
 * table lookup a byte. Used only where the processor says it has it; the table is the reference (the tests compare
 * the two on random frames through the Python decoder, which uses neither). */
#define HAVE_HARDWARE_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc32c_hardware(const unsigned char *p, Py_ssize_t n) {
    uint64_t c = 0xFFFFFFFFu;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        c = __builtin_ia32_crc32di(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    for (; i < n; i++) c32 = __builtin_ia32_crc32qi(c32, p[i]);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

static int hardware_crc = 0;

static uint32_t crc32c(const unsigned char *p, Py_ssize_t n) {
#ifdef HAVE_HARDWARE_CRC
    if (hardware_crc) return crc32c_hardware(p, n);
#endif
    return crc32c_table(p, n);
}

static PyObject *crc(PyObject *self, PyObject *args) {
    Py_buffer view;
    int table_only = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &table_only)) return NULL;
    uint32_t value = table_only ? crc32c_table(view.buf, view.len) : crc32c(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(value);
}

/* A varint at *i (below end): its value, or -1 if cut off, -2 if too long or 2**32 or more. */
static int64_t varint(const unsigned char *b, Py_ssize_t *i, Py_ssize_t end) {
    uint64_t value = 0;
    for (int k = 0; k < MAX_VARINT_BYTES; k++) {
        if (*i >= end) return -1;
        unsigned char byte = b[(*i)++];
        value |= (uint64_t)(byte & 0x7F) << (7 * k);
        if (byte < 0x80) return value >= ((uint64_t)1 << 32) ? -2 : (int64_t)value;
    }
    return -2;
}

/* The mode an opcode starts or ends (0 when it does neither). */
static int started_by(unsigned char op) { return op == 0xC1 ? 2 : op == 0xC3 ? 1 : op == 0xC5 ? 3 : 0; }
static int ended_by(unsigned char op) { return op == 0xC2 ? 2 : op == 0xC4 ? 1 : op == 0xC6 ? 3 : 0; }

/* Whether the payload (after its entry byte) is one this loop takes: tokens complete, opcodes well nested from
 * ``mode``, nothing that resets or ends the stream. */
static int acceptable(const unsigned char *b, Py_ssize_t i, Py_ssize_t end, int mode) {
    while (i < end) {
        unsigned char byte = b[i];
        if (byte < LONG_TOKEN) { i++; continue; }
        if (byte == LONG_TOKEN) {
            i++;
            if (varint(b, &i, end) < 0) return 0;
            continue;
        }
        if (byte <= SHORT_MAX) {
            if (i + 1 >= end) return 0;
            i += 2;
            continue;
        }
        i++;
        if (byte == CHUNK_END || byte == FLUSH) continue;
        if (started_by(byte)) {
            if (mode != 0) return 0;
            mode = started_by(byte);
            continue;
        }
        if (ended_by(byte)) {
            if (mode != ended_by(byte)) return 0;
            mode = 0;
            continue;
        }
        return 0; /* STREAM_END, a reserved opcode or an invalid byte: the Python decoder's */
    }
    return 1;
}

/* The hot table's 127 ids into ``table``; -1 with an exception set if it is not such a sequence. */
static int read_table(PyObject *hot, long *table) {
    PyObject *fast = PySequence_Fast(hot, "the hot table must be a sequence");
    if (fast == NULL) return -1;
    int failed = 0;
    if (PySequence_Fast_GET_SIZE(fast) != LONG_TOKEN) {
        PyErr_SetString(PyExc_ValueError, "a hot table of 127 ids is expected");
        failed = -1;
    }
    for (int k = 0; k < LONG_TOKEN && !failed; k++) {
        table[k] = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, k));
        if (table[k] == -1 && PyErr_Occurred()) failed = -1;
    }
    Py_DECREF(fast);
    return failed;
}

/* The tokens taken since the last chunk was emitted, in C: the stream's buffered list (``tokens``, from frames
 * before this call) comes first, then ``ids``. Python ints are made once, straight into the chunk's tuple. */
typedef struct {
    long *ids;
    Py_ssize_t count, room;
} Pending;

static int pend(Pending *pending, long id) {
    if (pending->count == pending->room) {
        Py_ssize_t room = pending->room ? pending->room * 2 : 4096;
        long *grown = PyMem_Realloc(pending->ids, (size_t)room * sizeof(long));
        if (grown == NULL) { PyErr_NoMemory(); return -1; }
        pending->ids = grown;
        pending->room = room;
    }
    pending->ids[pending->count++] = id;
    return 0;
}

static int emit(PyObject *out, PyObject *tokens, Pending *pending, PyObject *content, PyObject *modes,
                PyObject *stream, int mode, int boundary) {
    Py_ssize_t before = PyList_GET_SIZE(tokens), n = before + pending->count;
    if (n == 0) return 0;
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL) return -1;
    for (Py_ssize_t k = 0; k < before; k++) {
        PyObject *item = PyList_GET_ITEM(tokens, k);
        Py_INCREF(item);
        PyTuple_SET_ITEM(tuple, k, item);
    }
    for (Py_ssize_t k = 0; k < pending->count; k++) {
        PyObject *value = PyLong_FromLong(pending->ids[k]);
        if (value == NULL) { Py_DECREF(tuple); return -1; }
        PyTuple_SET_ITEM(tuple, before + k, value);
    }
    if (before && PyList_SetSlice(tokens, 0, before, NULL) < 0) { Py_DECREF(tuple); return -1; }
    pending->count = 0;
    PyObject *chunk = PyObject_CallFunctionObjArgs(content, stream, PyTuple_GET_ITEM(modes, mode), tuple,
                                                   boundary ? Py_True : Py_False, NULL);
    Py_DECREF(tuple);
    if (chunk == NULL) return -1;
    int failed = PyList_Append(out, chunk);
    Py_DECREF(chunk);
    return failed;
}

/* What is still pending when the call returns goes back to the stream's list, for the frames after it. */
static int keep(PyObject *tokens, Pending *pending) {
    for (Py_ssize_t k = 0; k < pending->count; k++) {
        PyObject *value = PyLong_FromLong(pending->ids[k]);
        if (value == NULL) return -1;
        int failed = PyList_Append(tokens, value);
        Py_DECREF(value);
        if (failed) return -1;
    }
    pending->count = 0;
    return 0;
}

static PyObject *run(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, max_payload;
    long long stream_id, expected;
    int mode;
    PyObject *hot, *tokens, *out, *content, *modes;
    if (!PyArg_ParseTuple(args, "y*nLLiOnO!O!OO!", &view, &start, &stream_id, &expected, &mode, &hot, &max_payload,
                          &PyList_Type, &tokens, &PyList_Type, &out, &content, &PyTuple_Type, &modes))
        return NULL;
    PyObject *result = NULL, *stream = NULL; /* the stream id as a Python int, made with the table below */
    long table[LONG_TOKEN];
    Pending pending = {NULL, 0, 0};
    if (PyTuple_GET_SIZE(modes) != 4) {
        PyErr_SetString(PyExc_ValueError, "four modes are expected");
        goto done;
    }
    const unsigned char *b = view.buf;
    Py_ssize_t n = view.len, p = start, taken = 0;
    while (p < n) {
        /* the header: every field checked before anything changes */
        if (n - p < 3 || b[p] != FRAME_START || b[p + 1] != VERSION || b[p + 2] != KIND_DATA) break;
        Py_ssize_t i = p + 3;
        int64_t sid = varint(b, &i, n), seq = varint(b, &i, n), length = varint(b, &i, n);
        if (sid != stream_id || seq != expected || length < 1 || length > max_payload) break;
        Py_ssize_t stop = i + (Py_ssize_t)length, end = stop + 4;
        if (end > n) break;
        uint32_t sent = (uint32_t)b[stop] | ((uint32_t)b[stop + 1] << 8) | ((uint32_t)b[stop + 2] << 16) |
                        ((uint32_t)b[stop + 3] << 24);
        if (crc32c(b + p + 1, stop - (p + 1)) != sent) break;
        if (b[i] != mode || !acceptable(b, i + 1, stop, mode)) break;
        /* the first frame taken: the hot table read and the stream id made (not before: a call that takes no frame,
         * as after each frame of another stream, costs only the header checks) */
        if (stream == NULL) {
            if (read_table(hot, table) < 0) goto done;
            stream = PyLong_FromLongLong(stream_id);
            if (stream == NULL) goto done;
        }
        /* the payload, now known to be taken whole */
        for (Py_ssize_t k = i + 1; k < stop;) {
            unsigned char byte = b[k];
            int failed = 0;
            if (byte < LONG_TOKEN) {
                failed = pend(&pending, table[byte]);
                k++;
            } else if (byte == LONG_TOKEN) {
                k++;
                failed = pend(&pending, (long)varint(b, &k, stop));
            } else if (byte <= SHORT_MAX) {
                failed = pend(&pending, ((long)(byte & 0x3F) << 8) | b[k + 1]);
                k += 2;
            } else {
                k++;
                failed = emit(out, tokens, &pending, content, modes, stream, mode, byte != FLUSH);
                int started = started_by(byte);
                if (started) mode = started;
                else if (ended_by(byte)) mode = 0;
            }
            if (failed) goto done;
        }
        expected = seq + 1;
        p = end;
        taken++;
    }
    if (keep(tokens, &pending) < 0) goto done;
    result = Py_BuildValue("nLin", p, expected, mode, taken);
done:
    PyMem_Free(pending.ids);
    Py_XDECREF(stream);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "Take the common DATA frames of one stream; see the module's source for the contract."},
    {"crc", crc, METH_VARARGS, "CRC-32C of the bytes as the loop computes it (with table_only, by the lookup table)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "groundstate.wire._frameloop",
                                    "The SIGIL decoder's compiled frame loop for the common case.", -1, methods};

PyMODINIT_FUNC PyInit__frameloop(void) {
    crc_init();
#ifdef HAVE_HARDWARE_CRC
    __builtin_cpu_init();
    hardware_crc = __builtin_cpu_supports("sse4.2");
#endif
    return PyModule_Create(&module);
}

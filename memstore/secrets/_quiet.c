/* memstore.secrets._quiet: whether a text is one the secrets detector cannot flag, in one C pass.

   detect.scan(text) finds nothing in a text that holds none of the rules' anchor words (lower-cased:
   detect._ANCHORS), no private-key header ("-----BEGIN ") and no long token (a run of
   detect._LONG_TOKEN_CHARS of at least detect's run length): its rules only read the lines that
   hold an anchor, its private-key rule needs the header, and detect-secrets' plugins are only
   asked about a text with a long token. Most texts of a conversation are such texts; telling so
   in Python (a lower-cased copy, an expression searched from rare characters, a translated copy
   of the bytes) was most of the scan's time over a big import.

   configure(anchors, token_chars, run) takes detect's anchors (lower-case ASCII, 1 to 63
   characters each), the long-token characters and the run length, once. quiet(text) is then True
   when `text` holds none of the three, False when it holds one (the caller then runs the detector
   as before). Anchors are looked for in the text as str.lower() makes it, as the detector does: a
   character past ASCII lower-cases into one that is not ASCII, but for the Kelvin sign ('k') and
   the dotted capital I (two characters: the detector then reads the whole text, so such a text is
   never quiet). Each anchor is looked for from its rarest character (the order of RARITY): a
   character that starts no look costs one table read. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_ANCHORS 64
#define MAX_ANCHOR_LEN 63
#define MAX_LOOKS 16 /* anchors looked for from one character */

/* rarest first, as in conversation text; a character not listed counts as the most common */
static const char RARITY[] = "/jz\"_x-:kwqvbygpfmucldhrsnioate";

static char anchors[MAX_ANCHORS][MAX_ANCHOR_LEN + 1];
static unsigned char anchor_len[MAX_ANCHORS];
/* for each lower-cased character: the anchors looked for from it, and at which offset in them */
static unsigned char looks[256][MAX_LOOKS][2];
static unsigned char n_looks[256];
static unsigned char in_token[256];
static unsigned char lower[256];
static const char HEADER[] = "-----BEGIN ";
static Py_ssize_t run_length = 0;
static int configured = 0;

static int
rank(unsigned char c)
{
    const char *at = strchr(RARITY, c);
    return (c && at) ? (int)(at - RARITY) : (int)sizeof(RARITY);
}

static PyObject *
configure(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *words;
    const char *token_chars;
    Py_ssize_t token_len, run;
    if (!PyArg_ParseTuple(args, "O!s#n", &PyTuple_Type, &words, &token_chars, &token_len, &run))
        return NULL;
    configured = 0;
    Py_ssize_t n = PyTuple_GET_SIZE(words);
    if (n > MAX_ANCHORS || run < 1) {
        PyErr_SetString(PyExc_ValueError, "too many anchors, or a run shorter than 1");
        return NULL;
    }
    memset(n_looks, 0, sizeof(n_looks));
    memset(in_token, 0, sizeof(in_token));
    for (int c = 0; c < 256; c++)
        lower[c] = (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : (unsigned char)c;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *w = PyTuple_GET_ITEM(words, i);
        Py_ssize_t len;
        const char *s = PyUnicode_Check(w) ? PyUnicode_AsUTF8AndSize(w, &len) : NULL;
        if (s == NULL || len < 1 || len > MAX_ANCHOR_LEN || !PyUnicode_IS_ASCII(w)) {
            PyErr_SetString(PyExc_ValueError, "an anchor is 1 to 63 ASCII characters");
            return NULL;
        }
        int best = 0;
        for (Py_ssize_t j = 0; j < len; j++) {
            if (lower[(unsigned char)s[j]] != (unsigned char)s[j]) {
                PyErr_SetString(PyExc_ValueError, "an anchor is lower-case");
                return NULL;
            }
            if (rank((unsigned char)s[j]) < rank((unsigned char)s[best]))
                best = (int)j;
        }
        unsigned char c = (unsigned char)s[best];
        if (n_looks[c] == MAX_LOOKS) {
            PyErr_SetString(PyExc_ValueError, "too many anchors share their rarest character");
            return NULL;
        }
        memcpy(anchors[i], s, (size_t)len);
        anchor_len[i] = (unsigned char)len;
        looks[c][n_looks[c]][0] = (unsigned char)i;
        looks[c][n_looks[c]][1] = (unsigned char)best;
        n_looks[c]++;
    }
    for (Py_ssize_t j = 0; j < token_len; j++)
        in_token[(unsigned char)token_chars[j]] = 1;
    run_length = run;
    configured = 1;
    Py_RETURN_NONE;
}

/* whether anchor `a` lies at `start` of the lowered text (`s` lowered by the table) */
static int
holds_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t start, int a)
{
    Py_ssize_t len = anchor_len[a];
    if (start < 0 || start + len > n)
        return 0;
    for (Py_ssize_t j = 0; j < len; j++)
        if (lower[s[start + j]] != (unsigned char)anchors[a][j])
            return 0;
    return 1;
}

/* the pass: long tokens and the header read in `s`, anchors in `a` (as lower-cased by the table);
   the two are the same text but for a non-ASCII one (see quiet) */
static int
quiet_in(const unsigned char *s, const unsigned char *a, Py_ssize_t n)
{
    const Py_ssize_t header = (Py_ssize_t)sizeof(HEADER) - 1;
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        run = in_token[c] ? run + 1 : 0;
        if (run >= run_length)
            return 0;
        if (c == '-' && i + header <= n && memcmp(s + i, HEADER, (size_t)header) == 0)
            return 0;
        unsigned char l = lower[a[i]];
        for (int k = 0; k < n_looks[l]; k++)
            if (holds_at(a, n, i - looks[l][k][1], looks[l][k][0]))
                return 0;
    }
    return 1;
}

#define DOTTED_CAPITAL_I 0x130 /* lower-cased into two characters, an 'i' among them */
#define KELVIN_SIGN 0x212a     /* lower-cased into 'k' */
#define NOT_ASCII 0x80         /* stands for any other character past ASCII: in no anchor or token */

static PyObject *
quiet(PyObject *Py_UNUSED(self), PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "quiet() takes a str");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "quiet() before configure()");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text)) {
        const unsigned char *s = (const unsigned char *)PyUnicode_DATA(text);
        return PyBool_FromLong(quiet_in(s, s, n));
    }
    /* A character past ASCII is in no long token (the detector reads a token's characters in the
       text's UTF-8 bytes, where such a character's are all >= 0x80) nor in the header, and in no
       anchor but as text.lower() makes it: only the Kelvin sign becomes ASCII ('k'), and the
       dotted capital I makes the lowered text longer (the detector then reads the whole text). */
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    unsigned char *s = PyMem_Malloc(2 * (size_t)n), *a = s + n;
    if (s == NULL)
        return PyErr_NoMemory();
    int told = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == DOTTED_CAPITAL_I) {
            told = 0;
            break;
        }
        s[i] = c < 0x80 ? (unsigned char)c : NOT_ASCII;
        a[i] = c == KELVIN_SIGN ? 'k' : s[i];
    }
    told = told && quiet_in(s, a, n);
    PyMem_Free(s);
    return PyBool_FromLong(told);
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "Take detect's anchors, token characters and run."},
    {"quiet", quiet, METH_O, "Whether the detector cannot flag this text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memstore.secrets._quiet",
    "Texts the secrets detector cannot flag, told in one C pass (see secrets/detect.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__quiet(void)
{
    return PyModule_Create(&module);
}

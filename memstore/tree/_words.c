/* memstore.tree._words: a write's words, looked up a C loop at a time.

   form_ids(texts, forms, tokens[, cache]) counts what tree/termsets.py's _chunk counted with
   [tokens(t) for t in texts] and one lookup of each token in `forms`: for every text, in order,
   the value `forms` gives each of its words (its surface form's id, -1 when it is not a term),
   and how many words each text has. A text of ASCII characters only (most texts) is read here:
   its words are memstore.text.long_name_words' (the matches of [A-Za-z][\w'-]{2,}), which are the
   runs of [A-Za-z0-9_'-] from their first letter on, when three characters or more are left. Any
   other text's words are `tokens(text)`'s. A word found in `forms` (a dict) costs no Python step;
   one that is not is asked of `forms` as `forms[word]` (its __missing__ judges it, once). `cache`
   (a bytearray of CACHE_BYTES, kept by the caller for one `forms` whose values never change)
   keeps words already looked up, so that the common ones cost no Python object at all.

   Returns (ids, counts): two bytes objects of native int64, one per word and one per text.

   phrases(text, memo) is tree/naming.py's _phrases_of after its _clean. The text's tokens are
   _PHRASE_TOKEN's ([^\W\d_][\w'’-]*|[^\w\s'’-]+|\d[\w.,:/-]*, with Python's classes of a str:
   \w str.isalnum() or '_', \d a decimal digit, \s str.isspace(); tables for ASCII, the Unicode
   database past it). A token of the second or third kind never starts with a letter, so
   _phrase_word makes None of it: it ends a run here without a lookup. A word's judgement is
   memo[word] (_PHRASE_WORDS); the phrases of each run are _runs_phrases'.

   phrase_codes(text, memo) reads the text the same way, with memo[word] giving (word id, stem id,
   edge) (naming._PHRASE_CODES: ids in [1, 2^21)), and gives each phrase as two int64 codes, the
   ids of its stems and of its words packed 21 bits each from the low end: bytes of native int64
   pairs. key_phrases(codes, users, many, k, rarity, names, strict, min_rarity) is naming's
   key_phrases over texts read so (names[id] the word or stem of an id; users one byte per text,
   non-zero for a text that counts as a user's): the phrases' counts and the texts holding them,
   rarity(sorted stems of the phrases kept) called once (a dict, or None for weights of 1.0), the
   scores in the same float operations, ranked by score then by first occurrence, the first k
   that share no stem with a better one, each with its most common spelling: [(phrase, score)].

   top_terms(parts, k, words) is TermSets.top's ranking of a window (tree/termsets.py): `parts`
   are the counts of its texts, in order (TermSets.counted: (block, a, b, fa, fb, n), block[0]
   holding the text's rows a:b of (term id, first position, 2 + occurrences, capitalised) as
   int32, n the text's number of words); a term scores the sum of its rows' third column plus 1.5
   when any of them is capitalised, and first occurs where its earliest row says, offset by the
   words of the texts before. The set of words[id] of the `k` best by score, then by first
   occurrence (all of them when there are no more than k). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* 0: ends a run; 1: a letter; 2: a digit, '_', '\'' or '-' (inside a run, never its start) */
static unsigned char KIND[256];

typedef struct {
    int64_t *data;
    Py_ssize_t len, cap;
} Buf;

static int
buf_push(Buf *b, int64_t v)
{
    if (b->len == b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 4096;
        int64_t *grown = PyMem_Realloc(b->data, (size_t)cap * sizeof(int64_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = grown;
        b->cap = cap;
    }
    b->data[b->len++] = v;
    return 0;
}

/* forms[word] as an int64 into `out`: the dict's own entry when it has one, else through
   forms.__getitem__ (its __missing__). */
static int
look_up(PyObject *forms, PyObject *word, Buf *out)
{
    PyObject *got = PyDict_GetItemWithError(forms, word); /* borrowed */
    long long v;
    if (got != NULL) {
        v = PyLong_AsLongLong(got);
    }
    else {
        if (PyErr_Occurred())
            return -1;
        got = PyObject_GetItem(forms, word); /* new */
        if (got == NULL)
            return -1;
        v = PyLong_AsLongLong(got);
        Py_DECREF(got);
    }
    if (v == -1 && PyErr_Occurred())
        return -1;
    return buf_push(out, (int64_t)v);
}

/* A cache of words already looked up, in a buffer the caller owns (TermSets keeps one per
   vocabulary: a word's form id never changes there): CACHE_SLOTS entries, each a word of up to
   CACHE_WORD characters with its value, found by a hash of its bytes. A hit costs no Python
   object; the most common few thousand words are most of a write's words. */
#define CACHE_SLOTS 65536
#define CACHE_WORD 20
typedef struct {
    uint32_t hash;
    uint32_t len; /* 0: empty */
    int64_t value;
    unsigned char word[CACHE_WORD];
} Slot;

static uint32_t
word_hash(const unsigned char *w, Py_ssize_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (Py_ssize_t j = 0; j < n; j++)
        h = (h ^ w[j]) * 16777619u;
    return h;
}

static Py_ssize_t
ascii_words(const unsigned char *s, Py_ssize_t n, PyObject *forms, Buf *out, Slot *cache)
{
    Py_ssize_t i = 0, found = 0;
    while (i < n) {
        while (i < n && KIND[s[i]] == 0)
            i++;
        Py_ssize_t first = -1;
        while (i < n && KIND[s[i]] != 0) {
            if (first < 0 && KIND[s[i]] == 1)
                first = i;
            i++;
        }
        if (first >= 0 && i - first >= 3) {
            const unsigned char *w = s + first;
            Py_ssize_t len = i - first;
            Slot *slot = NULL;
            if (cache != NULL && len <= CACHE_WORD) {
                uint32_t h = word_hash(w, len);
                slot = &cache[h & (CACHE_SLOTS - 1)];
                if (slot->len == (uint32_t)len && slot->hash == h
                    && memcmp(slot->word, w, (size_t)len) == 0) {
                    if (buf_push(out, slot->value))
                        return -1;
                    found++;
                    continue;
                }
                slot->len = 0; /* (refilled below once the value is known) */
                slot->hash = h;
            }
            PyObject *word = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, w, len);
            if (word == NULL)
                return -1;
            int failed = look_up(forms, word, out);
            Py_DECREF(word);
            if (failed)
                return -1;
            if (slot != NULL) {
                memcpy(slot->word, w, (size_t)len);
                slot->value = out->data[out->len - 1];
                slot->len = (uint32_t)len;
            }
            found++;
        }
    }
    return found;
}

static Py_ssize_t
other_words(PyObject *text, PyObject *forms, PyObject *tokens, Buf *out)
{
    PyObject *words = PyObject_CallOneArg(tokens, text);
    if (words == NULL)
        return -1;
    PyObject *seq = PySequence_Fast(words, "tokens() must return a sequence");
    Py_DECREF(words);
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (look_up(forms, items[k], out)) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return n;
}

static PyObject *
form_ids(PyObject *module, PyObject *args)
{
    PyObject *texts, *forms, *tokens, *cache_obj = Py_None;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O!O|O:form_ids", &PyList_Type, &texts, &PyDict_Type, &forms,
                          &tokens, &cache_obj))
        return NULL;
    Py_buffer cache_view;
    Slot *cache = NULL;
    if (cache_obj != Py_None) {
        if (!PyByteArray_Check(cache_obj)
            || PyByteArray_GET_SIZE(cache_obj) != (Py_ssize_t)(CACHE_SLOTS * sizeof(Slot))) {
            PyErr_SetString(PyExc_TypeError, "form_ids: the cache is not a bytearray of CACHE_BYTES");
            return NULL;
        }
        if (PyObject_GetBuffer(cache_obj, &cache_view, PyBUF_WRITABLE) < 0)
            return NULL;
        cache = (Slot *)cache_view.buf;
    }
    /* the texts as they are now (a __missing__ could change or drop the caller's list) */
    PyObject *items = PyList_AsTuple(texts);
    Py_ssize_t n = items != NULL ? PyTuple_GET_SIZE(items) : 0;
    Buf ids = {NULL, 0, 0};
    int64_t *counts = items != NULL ? PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int64_t)) : NULL;
    PyObject *result = NULL;
    if (counts == NULL) {
        if (items != NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < n; t++) {
        PyObject *text = PyTuple_GET_ITEM(items, t);
        Py_INCREF(text);
        Py_ssize_t got;
        if (!PyUnicode_Check(text)) {
            PyErr_Format(PyExc_TypeError, "form_ids: text %zd is not a str", t);
            got = -1;
        }
        else if (PyUnicode_IS_ASCII(text)) {
            got = ascii_words(PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text), forms, &ids,
                              cache);
        }
        else {
            got = other_words(text, forms, tokens, &ids);
        }
        Py_DECREF(text);
        if (got < 0)
            goto done;
        counts[t] = (int64_t)got;
    }
    {
        PyObject *a = PyBytes_FromStringAndSize((const char *)ids.data,
                                                ids.len * (Py_ssize_t)sizeof(int64_t));
        PyObject *b = a ? PyBytes_FromStringAndSize((const char *)counts,
                                                    n * (Py_ssize_t)sizeof(int64_t))
                        : NULL;
        if (a != NULL && b != NULL)
            result = PyTuple_Pack(2, a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
done:
    if (cache != NULL)
        PyBuffer_Release(&cache_view);
    Py_XDECREF(items);
    PyMem_Free(ids.data);
    PyMem_Free(counts);
    return result;
}

/* _PHRASE_TOKEN's classes of a character, as Python's re reads a str: \w is str.isalnum() or '_',
   \d a decimal digit, \s str.isspace(). START: 1 a letter ([^\W\d_]: a word character but a
   decimal digit or '_'); 2 a decimal digit; 3 whitespace, '_', '\'', '’' or '-': starts no token;
   0 anything else (a token of punctuation). Tables for ASCII, the Unicode database past it. */
static unsigned char START[128];
/* characters that go on a word ([\w'’-]) and a number ([\w.,:/-]) */
static unsigned char IN_WORD[128], IN_NUMBER[128];
#define RIGHT_QUOTE 0x2019

static inline int
start_kind(Py_UCS4 c)
{
    if (c < 128)
        return START[c];
    if (Py_UNICODE_ISDECIMAL(c))
        return 2;
    if (Py_UNICODE_ISALNUM(c))
        return 1;
    return Py_UNICODE_ISSPACE(c) || c == RIGHT_QUOTE ? 3 : 0;
}

static inline int
in_word(Py_UCS4 c)
{
    return c < 128 ? IN_WORD[c] : Py_UNICODE_ISALNUM(c) || c == RIGHT_QUOTE;
}

static inline int
in_number(Py_UCS4 c)
{
    return c < 128 ? IN_NUMBER[c] : Py_UNICODE_ISALNUM(c);
}

/* "a b" or "a b c" of ASCII words (f"{a} {b}" otherwise) */
static PyObject *
spaced(PyObject **words, int k)
{
    Py_ssize_t len = k - 1;
    for (int j = 0; j < k; j++) {
        if (!PyUnicode_IS_ASCII(words[j]))
            return k == 2 ? PyUnicode_FromFormat("%U %U", words[0], words[1])
                          : PyUnicode_FromFormat("%U %U %U", words[0], words[1], words[2]);
        len += PyUnicode_GET_LENGTH(words[j]);
    }
    PyObject *out = PyUnicode_New(len, 127);
    if (out == NULL)
        return NULL;
    Py_UCS1 *at = PyUnicode_1BYTE_DATA(out);
    for (int j = 0; j < k; j++) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(words[j]);
        if (j)
            *at++ = ' ';
        memcpy(at, PyUnicode_1BYTE_DATA(words[j]), (size_t)n);
        at += n;
    }
    return out;
}

/* A phrase of one to three words, as one int64: their ids (each in [1, 2^ID_BITS)) packed from the
   low bits up, 0 past the last word. */
#define ID_BITS 21
#define ID_LIMIT (1LL << ID_BITS)
#define ID_MASK (ID_LIMIT - 1)

static inline int
code_words(int64_t code)
{
    return (code >> (2 * ID_BITS)) ? 3 : (code >> ID_BITS) ? 2 : 1;
}

/* What the loop over a text's tokens gives each phrase of a run: `out` (phrases) the list of
   ((stems...), surface), `codes` (phrase_codes) the pairs (stem code, surface code). */
typedef struct {
    PyObject *out;
    Buf *codes;
    int64_t *wid, *sid; /* the run's word and stem ids (phrase_codes) */
} Sink;

/* sink.out.append(((stems...), surface)) of run[0:k] */
static int
emit(Sink *sink, PyObject **infos, Py_ssize_t at, int k)
{
    if (sink->codes != NULL) {
        int64_t stem = 0, surface = 0;
        for (int j = 0; j < k; j++) {
            stem |= sink->sid[at + j] << (ID_BITS * j);
            surface |= sink->wid[at + j] << (ID_BITS * j);
        }
        return buf_push(sink->codes, stem) || buf_push(sink->codes, surface) ? -1 : 0;
    }
    infos += at;
    PyObject *words[3], *stems = PyTuple_New(k);
    if (stems == NULL)
        return -1;
    for (int j = 0; j < k; j++) {
        PyObject *stem = PyTuple_GET_ITEM(infos[j], 1);
        Py_INCREF(stem);
        PyTuple_SET_ITEM(stems, j, stem);
        words[j] = PyTuple_GET_ITEM(infos[j], 0);
    }
    PyObject *surface;
    if (k == 1) {
        surface = words[0];
        Py_INCREF(surface);
    }
    else {
        surface = spaced(words, k);
    }
    if (surface == NULL) {
        Py_DECREF(stems);
        return -1;
    }
    PyObject *pair = PyTuple_Pack(2, stems, surface);
    Py_DECREF(stems);
    Py_DECREF(surface);
    if (pair == NULL)
        return -1;
    int failed = PyList_Append(sink->out, pair);
    Py_DECREF(pair);
    return failed;
}

/* _runs_phrases(run, out); edges[i]: whether run[i] may neither start nor end a phrase */
static int
run_phrases(PyObject **run, const char *edges, Py_ssize_t n, Sink *sink)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (edges[i])
            continue;
        if (emit(sink, run, i, 1))
            return -1;
        if (i + 1 < n && !edges[i + 1] && emit(sink, run, i, 2))
            return -1;
        if (i + 2 < n && !edges[i + 2] && emit(sink, run, i, 3))
            return -1;
    }
    return 0;
}

static void
drop_run(PyObject **run, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(run[i]); /* (NULL: a word phrase_codes found in its cache) */
}

/* the phrases of the run read so far, which is then let go of */
static int
end_run(PyObject **run, const char *edges, Py_ssize_t *len, Sink *sink)
{
    if (*len == 0)
        return 0;
    int failed = run_phrases(run, edges, *len, sink);
    drop_run(run, *len);
    *len = 0;
    return failed;
}

/* an id of a judgement (word id, stem id, edge) that phrase_codes reads */
static int
judged_id(PyObject *info, int which, int64_t *id)
{
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(info, which));
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 1 || v >= ID_LIMIT) {
        PyErr_Format(PyExc_ValueError, "phrase_codes: an id out of [1, %lld)", (long long)ID_LIMIT);
        return -1;
    }
    *id = (int64_t)v;
    return 0;
}

/* The loop of phrases and phrase_codes: each token of the text judged by memo[token] (None: it
   ends a run), the phrases of each run given to the sink. */
/* the run's arrays twice as long (word ids first, then stem ids, in `ids` where coded) */
static int
grow_run(PyObject ***run, char **edges, int64_t **ids, Sink *sink, Py_ssize_t *cap)
{
    Py_ssize_t grown = *cap * 2;
    PyObject **r = PyMem_Realloc(*run, (size_t)grown * sizeof(PyObject *));
    if (r != NULL)
        *run = r;
    char *e = r != NULL ? PyMem_Realloc(*edges, (size_t)grown) : NULL;
    if (e != NULL)
        *edges = e;
    int coded = *ids != NULL;
    int64_t *d = e != NULL && coded ? PyMem_Realloc(*ids, (size_t)grown * 2 * sizeof(int64_t)) : NULL;
    if (d != NULL) {
        *ids = d;
        memmove(d + grown, d + *cap, (size_t)*cap * sizeof(int64_t));
        sink->wid = d;
        sink->sid = d + grown;
    }
    if (r == NULL || e == NULL || (coded && d == NULL)) {
        PyErr_NoMemory();
        return -1;
    }
    *cap = grown;
    return 0;
}

/* phrase_codes' cache value of a judgement: -1 for None, else word id | stem id << 21 | edge << 42 */
#define NO_WORD (-1)

static PyObject *
read_phrases(PyObject *text, PyObject *memo, int coded, Slot *cache)
{
    Py_INCREF(text);
    int text_kind = PyUnicode_KIND(text);
    const void *s = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, len = 0, cap = 64;
    PyObject **run = PyMem_Malloc((size_t)cap * sizeof(PyObject *));
    char *edges = PyMem_Malloc((size_t)cap);
    int64_t *ids = coded ? PyMem_Malloc((size_t)cap * 2 * sizeof(int64_t)) : NULL;
    Buf codes = {NULL, 0, 0};
    Sink sink = {coded ? NULL : PyList_New(0), coded ? &codes : NULL, NULL, NULL};
    PyObject *result = NULL;
    if (run == NULL || edges == NULL || (coded ? ids == NULL : sink.out == NULL)) {
        if (coded || sink.out != NULL)
            PyErr_NoMemory();
        goto done;
    }
    sink.wid = ids;
    sink.sid = ids != NULL ? ids + cap : NULL;
    while (i < n) {
        int kind = start_kind(PyUnicode_READ(text_kind, s, i));
        Py_ssize_t start = i;
        if (kind == 3) {
            i++;
            continue;
        }
        PyObject *info = NULL;
        Slot *slot = NULL;
        if (kind == 1) {
            for (i++; i < n && in_word(PyUnicode_READ(text_kind, s, i)); i++)
                ;
            if (cache != NULL && text_kind == PyUnicode_1BYTE_KIND && i - start <= CACHE_WORD) {
                const unsigned char *w = (const unsigned char *)s + start;
                Py_ssize_t wlen = i - start;
                uint32_t h = word_hash(w, wlen);
                slot = &cache[h & (CACHE_SLOTS - 1)];
                if (slot->len == (uint32_t)wlen && slot->hash == h
                    && memcmp(slot->word, w, (size_t)wlen) == 0) {
                    int64_t v = slot->value;
                    if (v == NO_WORD) {
                        if (end_run(run, edges, &len, &sink))
                            goto done;
                        continue;
                    }
                    if (len == cap && grow_run(&run, &edges, &ids, &sink, &cap))
                        goto done;
                    sink.wid[len] = v & ID_MASK;
                    sink.sid[len] = (v >> ID_BITS) & ID_MASK;
                    run[len] = NULL;
                    edges[len++] = (char)((v >> (2 * ID_BITS)) & 1);
                    continue;
                }
                slot->len = 0; /* (refilled below once the judgement is known) */
                slot->hash = h;
            }
            PyObject *word = PyUnicode_Substring(text, start, i);
            if (word == NULL)
                goto done;
            info = PyDict_GetItemWithError(memo, word); /* borrowed */
            if (info != NULL) {
                Py_INCREF(info);
            }
            else if (!PyErr_Occurred()) {
                info = PyObject_GetItem(memo, word); /* new: memo.__missing__ */
            }
            Py_DECREF(word);
            if (info == NULL)
                goto done;
            if (info == Py_None) {
                Py_DECREF(info);
                info = NULL;
            }
            else if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) != 3) {
                Py_DECREF(info);
                PyErr_SetString(PyExc_TypeError, coded ? "phrase_codes: a judgement is not (word id, stem id, edge)" : "phrases: a judgement is not (word, stem, edge)");
                goto done;
            }
        }
        else if (kind == 2) {
            for (i++; i < n && in_number(PyUnicode_READ(text_kind, s, i)); i++)
                ;
        }
        else {
            for (i++; i < n && start_kind(PyUnicode_READ(text_kind, s, i)) == 0; i++)
                ;
        }
        if (info == NULL) { /* a token that ends a run */
            if (slot != NULL) {
                memcpy(slot->word, (const unsigned char *)s + start, (size_t)(i - start));
                slot->value = NO_WORD;
                slot->len = (uint32_t)(i - start);
            }
            if (end_run(run, edges, &len, &sink))
                goto done;
            continue;
        }
        int edge = PyObject_IsTrue(PyTuple_GET_ITEM(info, 2));
        if (edge < 0) {
            Py_DECREF(info);
            goto done;
        }
        if (len == cap && grow_run(&run, &edges, &ids, &sink, &cap)) {
            Py_DECREF(info);
            goto done;
        }
        if (coded && (judged_id(info, 0, &sink.wid[len]) || judged_id(info, 1, &sink.sid[len]))) {
            Py_DECREF(info);
            goto done;
        }
        if (slot != NULL) {
            memcpy(slot->word, (const unsigned char *)s + start, (size_t)(i - start));
            slot->value = sink.wid[len] | (sink.sid[len] << ID_BITS) | ((int64_t)edge << (2 * ID_BITS));
            slot->len = (uint32_t)(i - start);
        }
        run[len] = info;
        edges[len++] = (char)edge;
    }
    if (end_run(run, edges, &len, &sink))
        goto done;
    if (coded) {
        result = PyBytes_FromStringAndSize((const char *)codes.data,
                                           (Py_ssize_t)(codes.len * (Py_ssize_t)sizeof(int64_t)));
    }
    else {
        result = sink.out;
        sink.out = NULL;
    }
done:
    if (run != NULL)
        drop_run(run, len);
    PyMem_Free(run);
    PyMem_Free(edges);
    PyMem_Free(ids);
    PyMem_Free(codes.data);
    Py_XDECREF(sink.out);
    Py_DECREF(text);
    return result;
}

static PyObject *
phrases(PyObject *module, PyObject *args)
{
    PyObject *text, *memo;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!:phrases", &text, &PyDict_Type, &memo))
        return NULL;
    return read_phrases(text, memo, 0, NULL);
}

static PyObject *
phrase_codes(PyObject *module, PyObject *args)
{
    PyObject *text, *memo, *cache_obj = Py_None;
    (void)module;
    if (!PyArg_ParseTuple(args, "UO!|O:phrase_codes", &text, &PyDict_Type, &memo, &cache_obj))
        return NULL;
    if (cache_obj == Py_None)
        return read_phrases(text, memo, 1, NULL);
    if (!PyByteArray_Check(cache_obj)
        || PyByteArray_GET_SIZE(cache_obj) != (Py_ssize_t)(CACHE_SLOTS * sizeof(Slot))) {
        PyErr_SetString(PyExc_TypeError, "phrase_codes: the cache is not a bytearray of CACHE_BYTES");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(cache_obj, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *out = read_phrases(text, memo, 1, (Slot *)view.buf);
    PyBuffer_Release(&view);
    return out;
}

/* top_terms' per-term state, indexed by term id and kept between calls: a term belongs to the
   current call when stamp[id] == call (nothing is cleared between calls) */
static uint64_t *stamp_of, call_no;
static int64_t *sum_of, *first_of;
static char *cap_of;
static Py_ssize_t n_slots;
static int64_t *touched;
static Py_ssize_t touched_cap;
typedef struct {
    double score;
    int64_t first, term;
} Ranked;
static Ranked *ranked;

/* *p grown from `have` to `n` items of `size` bytes, the new ones zeroed where `zero`; -1 with
   MemoryError set (then *p is as it was) */
static int
grow_array(void **p, size_t size, Py_ssize_t have, Py_ssize_t n, int zero)
{
    void *q = PyMem_Realloc(*p, (size_t)n * size);
    if (q == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (zero)
        memset((char *)q + (size_t)have * size, 0, (size_t)(n - have) * size);
    *p = q;
    return 0;
}

static int
grow_slots(Py_ssize_t need)
{
    if (need <= n_slots)
        return 0;
    Py_ssize_t n = n_slots ? n_slots : 1024;
    while (n < need)
        n *= 2;
    void *st = stamp_of, *su = sum_of, *fi = first_of, *ca = cap_of;
    int failed = grow_array(&st, sizeof(uint64_t), n_slots, n, 1) < 0
                 || grow_array(&su, sizeof(int64_t), n_slots, n, 0) < 0
                 || grow_array(&fi, sizeof(int64_t), n_slots, n, 0) < 0
                 || grow_array(&ca, 1, n_slots, n, 0) < 0;
    stamp_of = st, sum_of = su, first_of = fi, cap_of = ca;
    if (failed)
        return -1; /* (those grown keep their new size: n_slots says what all of them hold) */
    n_slots = n;
    return 0;
}

static int
push_touched(int64_t term, Py_ssize_t *m)
{
    if (*m == touched_cap) {
        Py_ssize_t cap = touched_cap ? 2 * touched_cap : 1024;
        int64_t *t = PyMem_Realloc(touched, (size_t)cap * sizeof(int64_t));
        if (t == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        touched = t;
        Ranked *r = PyMem_Realloc(ranked, (size_t)cap * sizeof(Ranked));
        if (r == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        ranked = r;
        touched_cap = cap;
    }
    touched[(*m)++] = term;
    return 0;
}

/* a ranks before b: the higher score, then the earlier first occurrence (never equal: no two
   terms first occur at the same place) */
static inline int
before(const Ranked *a, const Ranked *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    return a->first < b->first;
}

static inline void
swap_ranked(Ranked *a, Ranked *b)
{
    Ranked t = *a;
    *a = *b;
    *b = t;
}

/* ranked[0:take] made the best `take` of ranked[0:m], in any order (a quickselect) */
static void
select_best(Py_ssize_t m, Py_ssize_t take)
{
    Py_ssize_t lo = 0, hi = m;
    while (hi - lo > 1 && lo < take && take < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        swap_ranked(&ranked[mid], &ranked[hi - 1]);
        Ranked pivot = ranked[hi - 1];
        Py_ssize_t store = lo;
        for (Py_ssize_t i = lo; i < hi - 1; i++) {
            if (before(&ranked[i], &pivot)) {
                swap_ranked(&ranked[i], &ranked[store]);
                store++;
            }
        }
        swap_ranked(&ranked[store], &ranked[hi - 1]);
        if (store < take)
            lo = store + 1; /* ranked[lo..store] are among the best */
        else
            hi = store; /* ranked[store..] are not */
    }
}

static int
int32_format(const char *f)
{
    return f != NULL && (strcmp(f, "i") == 0 || strcmp(f, "<i") == 0 || strcmp(f, "=i") == 0);
}


/* key_pool(parts, m) is TermSets.key_terms's pool (tree/termsets.py): the `m` best terms of a
   window by score, then first occurrence (top_terms' ranking), best first, as (term id, score,
   first occurrence) tuples: the score the sum of the term's rows' third column plus 1.5 when any
   of them is capitalised (a float, as numpy sums it: the integers are exact), the first
   occurrence its earliest row's, offset by the words of the texts before. */

static int
by_rank(const void *x, const void *y)
{
    const Ranked *a = (const Ranked *)x, *b = (const Ranked *)y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* the rows of `parts` summed per term into sum_of/first_of/cap_of, the terms met in touched[0:m];
   -1 with an exception set on bad input */
static Py_ssize_t
sum_parts(PyObject *parts, const char *who)
{
    call_no++;
    Py_ssize_t m = 0, n_parts = PyList_GET_SIZE(parts);
    int64_t offset = 0;
    for (Py_ssize_t p = 0; p < n_parts; p++) {
        PyObject *part = PyList_GET_ITEM(parts, p);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 6 || !PyTuple_Check(PyTuple_GET_ITEM(part, 0))
            || PyTuple_GET_SIZE(PyTuple_GET_ITEM(part, 0)) < 1) {
            PyErr_Format(PyExc_TypeError, "%s: a part is not (block, a, b, fa, fb, n)", who);
            return -1;
        }
        Py_ssize_t a = PyNumber_AsSsize_t(PyTuple_GET_ITEM(part, 1), PyExc_OverflowError);
        Py_ssize_t b = PyNumber_AsSsize_t(PyTuple_GET_ITEM(part, 2), PyExc_OverflowError);
        Py_ssize_t n = PyNumber_AsSsize_t(PyTuple_GET_ITEM(part, 5), PyExc_OverflowError);
        if (PyErr_Occurred())
            return -1;
        Py_buffer view;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(PyTuple_GET_ITEM(part, 0), 0), &view,
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            return -1;
        if (view.ndim != 2 || view.itemsize != 4 || view.shape[1] != 4 || !int32_format(view.format)
            || a < 0 || b < a || b > view.shape[0]) {
            PyBuffer_Release(&view);
            PyErr_Format(PyExc_TypeError, "%s: a block's rows are not n x 4 int32", who);
            return -1;
        }
        const int32_t *rows = (const int32_t *)view.buf;
        for (Py_ssize_t r = a; r < b; r++) {
            const int32_t *row = rows + 4 * r;
            int64_t term = row[0];
            if (term < 0 || grow_slots((Py_ssize_t)term + 1) < 0) {
                PyBuffer_Release(&view);
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "%s: a negative term id", who);
                return -1;
            }
            if (stamp_of[term] != call_no) {
                if (push_touched(term, &m) < 0) {
                    PyBuffer_Release(&view);
                    return -1;
                }
                stamp_of[term] = call_no;
                sum_of[term] = 0;
                cap_of[term] = 0;
                first_of[term] = row[1] + offset;
            }
            sum_of[term] += row[2];
            if (row[3])
                cap_of[term] = 1;
        }
        PyBuffer_Release(&view);
        offset += n;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        int64_t t = touched[i];
        ranked[i].score = (double)sum_of[t] + (cap_of[t] ? 1.5 : 0.0);
        ranked[i].first = first_of[t];
        ranked[i].term = t;
    }
    return m;
}

/* the best `k` terms of `parts` (sum_parts) in ranked[0:take], in any order; take, or -1 with an
   exception set */
static Py_ssize_t
best_of(PyObject *parts, Py_ssize_t k, const char *who)
{
    Py_ssize_t m = sum_parts(parts, who);
    if (m < 0)
        return -1;
    Py_ssize_t take = k < m ? k : m;
    if (take < 0)
        take = 0;
    select_best(m, take);
    return take;
}

static PyObject *
top_terms(PyObject *module, PyObject *args)
{
    PyObject *parts, *words;
    Py_ssize_t k;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!nO!:top_terms", &PyList_Type, &parts, &k, &PyList_Type, &words))
        return NULL;
    Py_ssize_t take = best_of(parts, k, "top_terms");
    if (take < 0)
        return NULL;
    PyObject *out = PySet_New(NULL);
    if (out == NULL)
        return NULL;
    Py_ssize_t n_words = PyList_GET_SIZE(words);
    for (Py_ssize_t i = 0; i < take; i++) {
        if (ranked[i].term >= n_words) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_IndexError, "top_terms: a term id past the vocabulary");
            return NULL;
        }
        if (PySet_Add(out, PyList_GET_ITEM(words, ranked[i].term)) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *
key_pool(PyObject *module, PyObject *args)
{
    PyObject *parts;
    Py_ssize_t want;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!n:key_pool", &PyList_Type, &parts, &want))
        return NULL;
    Py_ssize_t take = best_of(parts, want, "key_pool");
    if (take < 0)
        return NULL;
    qsort(ranked, (size_t)take, sizeof(Ranked), by_rank);
    PyObject *out = PyList_New(take);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < take; i++) {
        PyObject *row = Py_BuildValue("(Ldn)", (long long)ranked[i].term, ranked[i].score,
                                      (Py_ssize_t)ranked[i].first);
        if (row == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

/* surfaces(parts, terms, term_of) is TermSets._surfaces's choice: for each term id of `terms`,
   the id of its most common surface form in the window (the counts of the form rows fa:fb of
   each part's block: form ids, first positions, counts; a form's term is term_of[form], an int64
   array), the form that occurs first on a tie (no two forms first occur at one place). */

static uint64_t surf_call = 0;
static uint64_t *f_stamp = NULL;
static int64_t *f_total = NULL, *f_at = NULL;
static Py_ssize_t f_cap = 0;
static uint64_t *w_stamp = NULL;
static Py_ssize_t *w_index = NULL;
static Py_ssize_t w_cap = 0;

static int
grow_forms(Py_ssize_t need)
{
    if (need <= f_cap)
        return 0;
    Py_ssize_t n = need > 2 * f_cap ? need : 2 * f_cap;
    void *st = f_stamp, *to = f_total, *at = f_at;
    int failed = grow_array(&st, sizeof(uint64_t), f_cap, n, 1) < 0
                 || grow_array(&to, sizeof(int64_t), f_cap, n, 0) < 0
                 || grow_array(&at, sizeof(int64_t), f_cap, n, 0) < 0;
    f_stamp = st, f_total = to, f_at = at;
    if (failed)
        return -1;
    f_cap = n;
    return 0;
}

static int
grow_wanted(Py_ssize_t need)
{
    if (need <= w_cap)
        return 0;
    Py_ssize_t n = need > 2 * w_cap ? need : 2 * w_cap;
    void *st = w_stamp, *ix = w_index;
    int failed = grow_array(&st, sizeof(uint64_t), w_cap, n, 1) < 0
                 || grow_array(&ix, sizeof(Py_ssize_t), w_cap, n, 0) < 0;
    w_stamp = st, w_index = ix;
    if (failed)
        return -1;
    w_cap = n;
    return 0;
}

static int
int64_format(const char *f)
{
    return f != NULL && (strcmp(f, "q") == 0 || strcmp(f, "<q") == 0 || strcmp(f, "=q") == 0
                         || (sizeof(long) == 8 && (strcmp(f, "l") == 0 || strcmp(f, "<l") == 0
                                                   || strcmp(f, "=l") == 0)));
}

/* one of a block's 1-D int32 arrays (block[which]), rows fa:fb of it checked */
static int
form_column(PyObject *block, Py_ssize_t which, Py_ssize_t fa, Py_ssize_t fb, Py_buffer *view)
{
    if (PyTuple_GET_SIZE(block) < 4) {
        PyErr_SetString(PyExc_TypeError, "surfaces: a block has no form rows");
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(block, which), view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
        < 0)
        return -1;
    if (view->ndim != 1 || view->itemsize != 4 || !int32_format(view->format) || fa < 0 || fb < fa
        || fb > view->shape[0]) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "surfaces: a block's form rows are not int32 a:b");
        return -1;
    }
    return 0;
}

static PyObject *
surfaces(PyObject *module, PyObject *args)
{
    PyObject *parts, *terms, *term_of_obj;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O!O:surfaces", &PyList_Type, &parts, &PyList_Type, &terms,
                          &term_of_obj))
        return NULL;
    Py_buffer tv;
    if (PyObject_GetBuffer(term_of_obj, &tv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (tv.ndim != 1 || tv.itemsize != 8 || !int64_format(tv.format)) {
        PyBuffer_Release(&tv);
        PyErr_SetString(PyExc_TypeError, "surfaces: term_of is not a 1-D int64 array");
        return NULL;
    }
    const int64_t *term_of = (const int64_t *)tv.buf;
    Py_ssize_t n_forms = tv.shape[0], n_terms = PyList_GET_SIZE(terms);
    /* per term of `terms`: (count, first occurrence, form id) of its best form so far, its id */
    int64_t *best = PyMem_Malloc((size_t)(n_terms ? n_terms : 1) * 4 * sizeof(int64_t));
    int64_t *seen = NULL;
    Py_ssize_t n_seen = 0, seen_cap = 0;
    PyObject *out = NULL;
    if (best == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    surf_call++;
    for (Py_ssize_t i = 0; i < n_terms; i++) {
        Py_ssize_t t = PyNumber_AsSsize_t(PyList_GET_ITEM(terms, i), PyExc_OverflowError);
        if (t == -1 && PyErr_Occurred())
            goto done;
        if (t < 0) {
            PyErr_SetString(PyExc_ValueError, "surfaces: a negative term id");
            goto done;
        }
        if (grow_wanted(t + 1) < 0)
            goto done;
        w_stamp[t] = surf_call;
        w_index[t] = i; /* (a term given twice: its last place holds its best form) */
        best[4 * i] = -1; /* count: none yet */
        best[4 * i + 3] = t;
    }
    int64_t offset = 0;
    for (Py_ssize_t p = 0; p < PyList_GET_SIZE(parts); p++) {
        PyObject *part = PyList_GET_ITEM(parts, p);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 6
            || !PyTuple_Check(PyTuple_GET_ITEM(part, 0))) {
            PyErr_SetString(PyExc_TypeError, "surfaces: a part is not (block, a, b, fa, fb, n)");
            goto done;
        }
        PyObject *block = PyTuple_GET_ITEM(part, 0);
        Py_ssize_t fa = PyNumber_AsSsize_t(PyTuple_GET_ITEM(part, 3), PyExc_OverflowError);
        Py_ssize_t fb = PyNumber_AsSsize_t(PyTuple_GET_ITEM(part, 4), PyExc_OverflowError);
        Py_ssize_t n = PyNumber_AsSsize_t(PyTuple_GET_ITEM(part, 5), PyExc_OverflowError);
        if (PyErr_Occurred())
            goto done;
        Py_buffer ids_v, at_v, count_v;
        if (form_column(block, 1, fa, fb, &ids_v) < 0)
            goto done;
        if (form_column(block, 2, fa, fb, &at_v) < 0) {
            PyBuffer_Release(&ids_v);
            goto done;
        }
        if (form_column(block, 3, fa, fb, &count_v) < 0) {
            PyBuffer_Release(&ids_v);
            PyBuffer_Release(&at_v);
            goto done;
        }
        const int32_t *ids = ids_v.buf, *ats = at_v.buf, *counts = count_v.buf;
        int failed = 0;
        for (Py_ssize_t r = fa; r < fb && !failed; r++) {
            int64_t fid = ids[r];
            if (fid < 0 || fid >= n_forms) {
                PyErr_SetString(PyExc_IndexError, "surfaces: a form id past term_of");
                failed = 1;
                break;
            }
            int64_t term = term_of[fid];
            if (term < 0 || term >= w_cap || w_stamp[term] != surf_call)
                continue;
            if (grow_forms((Py_ssize_t)fid + 1) < 0) {
                failed = 1;
                break;
            }
            if (f_stamp[fid] != surf_call) {
                if (n_seen == seen_cap) {
                    Py_ssize_t cap = seen_cap ? 2 * seen_cap : 256;
                    int64_t *grown = PyMem_Realloc(seen, (size_t)cap * sizeof(int64_t));
                    if (grown == NULL) {
                        PyErr_NoMemory();
                        failed = 1;
                        break;
                    }
                    seen = grown;
                    seen_cap = cap;
                }
                seen[n_seen++] = fid;
                f_stamp[fid] = surf_call;
                f_total[fid] = 0;
                f_at[fid] = ats[r] + offset;
            }
            f_total[fid] += counts[r];
        }
        PyBuffer_Release(&ids_v);
        PyBuffer_Release(&at_v);
        PyBuffer_Release(&count_v);
        if (failed)
            goto done;
        offset += n;
    }
    for (Py_ssize_t s = 0; s < n_seen; s++) {
        int64_t fid = seen[s];
        int64_t *b = best + 4 * w_index[term_of[fid]];
        if (b[0] < 0 || f_total[fid] > b[0] || (f_total[fid] == b[0] && f_at[fid] < b[1])) {
            b[0] = f_total[fid];
            b[1] = f_at[fid];
            b[2] = fid;
        }
    }
    out = PyList_New(n_terms);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n_terms; i++) {
        const int64_t *b = best + 4 * w_index[best[4 * i + 3]];
        if (b[0] < 0) {
            Py_CLEAR(out);
            PyErr_SetString(PyExc_KeyError, "surfaces: a term with no form in the window");
            goto done;
        }
        PyObject *fid = PyLong_FromLongLong(b[2]);
        if (fid == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, fid);
    }
done:
    PyMem_Free(best);
    PyMem_Free(seen);
    PyBuffer_Release(&tv);
    return out;
}

/* may_hold_artefact(text) is naming._may_hold_artefact for a text of ASCII characters (None for
   any other: the caller asks the Python): whether it holds ` [ < or @, "http" or "www." in any
   case, a file extension after a dot (one of those configure_artefacts was given, in any case,
   as the whole run of word characters after the dot: _FILE_EXT's alternatives followed by \b),
   or a run of `hex_run` hexadecimal digits. One pass, no copy of the text. */

#define MAX_EXTS 64
#define MAX_EXT_LEN 15
static char exts[MAX_EXTS][MAX_EXT_LEN + 1];
static int n_exts = -1; /* -1: not configured */
static Py_ssize_t hex_run = 0;

static PyObject *
configure_artefacts(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *given;
    Py_ssize_t run;
    if (!PyArg_ParseTuple(args, "O!n", &PyTuple_Type, &given, &run))
        return NULL;
    n_exts = -1;
    Py_ssize_t n = PyTuple_GET_SIZE(given);
    if (n > MAX_EXTS || run < 1) {
        PyErr_SetString(PyExc_ValueError, "too many extensions, or a run shorter than 1");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyTuple_GET_ITEM(given, i);
        Py_ssize_t len;
        const char *s = PyUnicode_Check(e) ? PyUnicode_AsUTF8AndSize(e, &len) : NULL;
        if (s == NULL || len < 1 || len > MAX_EXT_LEN || !PyUnicode_IS_ASCII(e)) {
            PyErr_SetString(PyExc_ValueError, "an extension is 1 to 15 ASCII characters");
            return NULL;
        }
        for (Py_ssize_t j = 0; j < len; j++)
            if (!(s[j] >= 'a' && s[j] <= 'z') && !(s[j] >= '0' && s[j] <= '9')) {
                PyErr_SetString(PyExc_ValueError, "an extension is lower-case letters and digits");
                return NULL;
            }
        memcpy(exts[i], s, (size_t)len);
        exts[i][len] = 0;
    }
    n_exts = (int)n;
    hex_run = run;
    Py_RETURN_NONE;
}

static unsigned char
low(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

static int
word_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

static int
hex_digit(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int
file_ext_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t i)
{
    Py_ssize_t j = i + 1;
    while (j < n && word_char(s[j]))
        j++;
    Py_ssize_t len = j - i - 1;
    if (len < 1 || len > MAX_EXT_LEN)
        return 0;
    for (int e = 0; e < n_exts; e++) {
        if ((Py_ssize_t)strlen(exts[e]) != len)
            continue;
        Py_ssize_t k = 0;
        while (k < len && low(s[i + 1 + k]) == (unsigned char)exts[e][k])
            k++;
        if (k == len)
            return 1;
    }
    return 0;
}

/* the characters at which may_hold_artefact looks closer: ` [ < @ . and h w in either case */
static unsigned char STOP[256];

static int
hex_run_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t i)
{
    /* whether the run of hex digits through s[i] (a hex digit) is hex_run long or longer */
    Py_ssize_t a = i, b = i + 1;
    while (a > 0 && hex_digit(s[a - 1]) && b - a < hex_run)
        a--;
    while (b < n && hex_digit(s[b]) && b - a < hex_run)
        b++;
    return b - a >= hex_run;
}

static PyObject *
may_hold_artefact(PyObject *Py_UNUSED(module), PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "may_hold_artefact() takes a str");
        return NULL;
    }
    if (n_exts < 0) {
        PyErr_SetString(PyExc_RuntimeError, "may_hold_artefact() before configure_artefacts()");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    const unsigned char *s = (const unsigned char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    /* any hex_run positions in a row hold one of hex_run - 1, 2 * hex_run - 1, ...: only those
       are looked at, a run measured from there */
    for (Py_ssize_t i = hex_run - 1; i < n; i += hex_run)
        if (hex_digit(s[i]) && hex_run_at(s, n, i))
            Py_RETURN_TRUE;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!STOP[s[i]])
            continue;
        unsigned char c = s[i], l = low(c);
        if (c == '`' || c == '[' || c == '<' || c == '@')
            Py_RETURN_TRUE;
        if (l == 'h' && i + 4 <= n && low(s[i + 1]) == 't' && low(s[i + 2]) == 't' &&
            low(s[i + 3]) == 'p')
            Py_RETURN_TRUE;
        if (l == 'w' && i + 4 <= n && low(s[i + 1]) == 'w' && low(s[i + 2]) == 'w' && s[i + 3] == '.')
            Py_RETURN_TRUE;
        if (c == '.' && file_ext_at(s, n, i))
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* ----- key_phrases: tree/naming.py's key_phrases over texts read by phrase_codes ----------- */

/* per-call state, kept between calls (grown, never shrunk): the phrases met, in the order first
   met, with their counts; a table of them by stem code; the words' weights by id */
typedef struct {
    int64_t code;
    int64_t tf, user, other; /* occurrences; texts (a user's, another's) holding it */
    Py_ssize_t last;         /* the last text that counted it */
    double score;
} Phrase;
static Phrase *met;
static Py_ssize_t met_cap;
static Py_ssize_t *table; /* index in met + 1, 0 for an empty slot (a call uses the first
                             slots it needs: a big call's table is not cleared by each small one) */
static Py_ssize_t table_cap;
static uint64_t weigh_call;
static uint64_t *weight_stamp;
static double *weight_of;
static Py_ssize_t weight_cap;

static inline uint64_t
mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dULL;
    return x ^ (x >> 33);
}

/* the index in met of the phrase `code`, added (counts 0) where new, in a table of mask + 1 slots */
static Py_ssize_t
phrase_at(int64_t code, Py_ssize_t mask, Py_ssize_t *n_met)
{
    Py_ssize_t slot = (Py_ssize_t)(mix((uint64_t)code) & (uint64_t)mask);
    while (table[slot]) {
        Py_ssize_t at = table[slot] - 1;
        if (met[at].code == code)
            return at;
        slot = (slot + 1) & mask;
    }
    Py_ssize_t at = (*n_met)++;
    met[at] = (Phrase){code, 0, 0, 0, -1, 0.0};
    table[slot] = at + 1;
    return at;
}

/* names[id] */
static PyObject *
name_of(PyObject *names, int64_t id)
{
    if (id >= PyList_GET_SIZE(names)) {
        PyErr_SetString(PyExc_IndexError, "key_phrases: an id past the names");
        return NULL;
    }
    PyObject *name = PyList_GET_ITEM(names, (Py_ssize_t)id);
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "key_phrases: a name is not a str");
        return NULL;
    }
    return name;
}

/* "a", "a b" or "a b c" of the words a code packs */
static PyObject *
spelt(PyObject *names, int64_t code)
{
    PyObject *words[3];
    int k = code_words(code);
    for (int j = 0; j < k; j++)
        if ((words[j] = name_of(names, (code >> (ID_BITS * j)) & ID_MASK)) == NULL)
            return NULL;
    if (k == 1) {
        Py_INCREF(words[0]);
        return words[0];
    }
    return spaced(words, k);
}

/* weight_of[id] for every word of the kept phrases: rarity(sorted their stems) (a dict: what it
   lacks weighs 1.0), or 1.0 each when rarity is None */
static int
weigh(PyObject *rarity, PyObject *names, Py_ssize_t n_met)
{
    Py_ssize_t most = PyList_GET_SIZE(names);
    if (most > weight_cap) {
        if (grow_array((void **)&weight_stamp, sizeof(uint64_t), weight_cap, most, 1) ||
            grow_array((void **)&weight_of, sizeof(double), weight_cap, most, 0))
            return -1;
        weight_cap = most;
    }
    weigh_call++;
    PyObject *stems = rarity != Py_None ? PyList_New(0) : NULL;
    if (rarity != Py_None && stems == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n_met; i++) {
        if (met[i].last == -2)
            continue; /* (not kept) */
        int64_t code = met[i].code;
        for (int j = code_words(code) - 1; j >= 0; j--) {
            int64_t id = (code >> (ID_BITS * j)) & ID_MASK;
            if (id >= most) {
                PyErr_SetString(PyExc_IndexError, "key_phrases: an id past the names");
                Py_XDECREF(stems);
                return -1;
            }
            if (weight_stamp[id] == weigh_call)
                continue;
            weight_stamp[id] = weigh_call;
            weight_of[id] = 1.0;
            if (stems != NULL) {
                PyObject *name = name_of(names, id);
                if (name == NULL || PyList_Append(stems, name)) {
                    Py_DECREF(stems);
                    return -1;
                }
            }
        }
    }
    if (stems == NULL)
        return 0;
    PyObject *weights = NULL;
    if (PyList_Sort(stems) == 0)
        weights = PyObject_CallOneArg(rarity, stems);
    if (weights != NULL && !PyDict_Check(weights)) {
        PyObject *as_dict = PyDict_New();
        if (as_dict != NULL && PyDict_Update(as_dict, weights)) {
            Py_CLEAR(as_dict);
        }
        Py_SETREF(weights, as_dict);
    }
    int failed = weights == NULL;
    for (Py_ssize_t i = 0; !failed && i < n_met; i++) {
        if (met[i].last == -2)
            continue;
        int64_t code = met[i].code;
        for (int j = code_words(code) - 1; j >= 0; j--) {
            int64_t id = (code >> (ID_BITS * j)) & ID_MASK;
            PyObject *w = PyDict_GetItemWithError(weights, PyList_GET_ITEM(names, (Py_ssize_t)id));
            if (w == NULL) {
                failed = PyErr_Occurred() != NULL;
                continue;
            }
            double v = PyFloat_AsDouble(w);
            if (v == -1.0 && PyErr_Occurred()) {
                failed = 1;
                break;
            }
            weight_of[id] = v;
        }
    }
    Py_XDECREF(weights);
    Py_DECREF(stems);
    return failed ? -1 : 0;
}

static int
by_score(const void *x, const void *y)
{
    const Phrase *a = met + *(const Py_ssize_t *)x, *b = met + *(const Py_ssize_t *)y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a < b ? -1 : a > b; /* the one met first */
}

/* the surface code the phrase `code` most often has in the texts (the first met on a tie) */
static int64_t
most_common_surface(Py_buffer *views, Py_ssize_t n_texts, int64_t code, Buf *seen)
{
    seen->len = 0; /* (surface code, count) pairs, in the order met */
    for (Py_ssize_t t = 0; t < n_texts; t++) {
        const int64_t *pairs = views[t].buf;
        Py_ssize_t m = views[t].len / (Py_ssize_t)(2 * sizeof(int64_t));
        for (Py_ssize_t j = 0; j < m; j++) {
            if (pairs[2 * j] != code)
                continue;
            int64_t surface = pairs[2 * j + 1];
            Py_ssize_t s;
            for (s = 0; s < seen->len && seen->data[s] != surface; s += 2)
                ;
            if (s < seen->len) {
                seen->data[s + 1]++;
            }
            else if (buf_push(seen, surface) || buf_push(seen, 1)) {
                return -1;
            }
        }
    }
    Py_ssize_t best = 0;
    for (Py_ssize_t s = 2; s < seen->len; s += 2)
        if (seen->data[s + 1] > seen->data[best + 1])
            best = s;
    return seen->data[best];
}

static PyObject *
key_phrases(PyObject *module, PyObject *args)
{
    PyObject *codes, *rarity, *names;
    Py_buffer users;
    int many, strict;
    Py_ssize_t k;
    double min_rarity;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!y*pnOO!pd:key_phrases", &PyList_Type, &codes, &users, &many,
                          &k, &rarity, &PyList_Type, &names, &strict, &min_rarity))
        return NULL;
    Py_ssize_t n_texts = PyList_GET_SIZE(codes), total = 0, n_met = 0, n_kept = 0;
    Py_buffer *views = PyMem_Calloc((size_t)n_texts + 1, sizeof(Py_buffer));
    Py_ssize_t n_views = 0, *order = NULL;
    Buf seen = {NULL, 0, 0};
    PyObject *out = NULL;
    const unsigned char *user = users.buf;
    if (views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (users.len != n_texts) {
        PyErr_SetString(PyExc_ValueError, "key_phrases: one user flag per text");
        goto done;
    }
    for (; n_views < n_texts; n_views++) {
        Py_buffer *v = &views[n_views];
        if (PyObject_GetBuffer(PyList_GET_ITEM(codes, n_views), v, PyBUF_SIMPLE))
            goto done;
        if (v->len % (Py_ssize_t)(2 * sizeof(int64_t))) {
            n_views++;
            PyErr_SetString(PyExc_ValueError, "key_phrases: codes are not (stem, surface) pairs");
            goto done;
        }
        total += v->len / (Py_ssize_t)(2 * sizeof(int64_t));
    }
    out = PyList_New(0);
    if (out == NULL || total == 0)
        goto done;
    /* every phrase met once at most per occurrence: a table at most half full */
    Py_ssize_t want = 64;
    while (want < 2 * total)
        want *= 2;
    if (total > met_cap) {
        if (grow_array((void **)&met, sizeof(Phrase), met_cap, total, 0))
            goto fail;
        met_cap = total;
    }
    if (want > table_cap) {
        if (grow_array((void **)&table, sizeof(Py_ssize_t), 0, want, 0))
            goto fail;
        table_cap = want;
    }
    memset(table, 0, (size_t)want * sizeof(Py_ssize_t));
    for (Py_ssize_t t = 0; t < n_texts; t++) {
        const int64_t *pairs = views[t].buf;
        Py_ssize_t m = views[t].len / (Py_ssize_t)(2 * sizeof(int64_t));
        for (Py_ssize_t j = 0; j < m; j++) {
            Phrase *p = met + phrase_at(pairs[2 * j], want - 1, &n_met);
            p->tf++;
            if (p->last != t) {
                p->last = t;
                if (user[t])
                    p->user++;
                else
                    p->other++;
            }
        }
    }
    /* a multi-word run said once is a sentence fragment, not a subject */
    for (Py_ssize_t i = 0; i < n_met; i++) {
        met[i].score = 2.0 * (double)met[i].user + (double)met[i].other;
        met[i].last = met[i].score < 2 && many && code_words(met[i].code) > 1 ? -2 : 0;
    }
    if (weigh(rarity, names, n_met))
        goto fail;
    order = PyMem_Malloc((size_t)n_met * sizeof(Py_ssize_t));
    if (order == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    static const double bonus[3] = {1.0, 1.6, 1.8};
    for (Py_ssize_t i = 0; i < n_met; i++) {
        Phrase *p = met + i;
        if (p->last == -2)
            continue;
        int n = code_words(p->code);
        double r = weight_of[p->code & ID_MASK];
        for (int j = 1; j < n; j++) {
            double w = weight_of[(p->code >> (ID_BITS * j)) & ID_MASK];
            if (w < r)
                r = w;
        }
        if (strict && r < min_rarity)
            continue;
        p->score = (p->score * 2 + (double)p->tf) * r * bonus[n - 1];
        if (p->score > 0)
            order[n_kept++] = i;
    }
    qsort(order, (size_t)n_kept, sizeof(Py_ssize_t), by_score);
    int64_t used[64][3];
    Py_ssize_t n_used = 0;
    for (Py_ssize_t o = 0; o < n_kept && n_used < k && n_used < 64; o++) {
        Phrase *p = met + order[o];
        int n = code_words(p->code), overlaps = 0;
        int64_t ids[3] = {0, 0, 0};
        for (int j = 0; j < n; j++)
            ids[j] = (p->code >> (ID_BITS * j)) & ID_MASK;
        for (Py_ssize_t u = 0; u < n_used && !overlaps; u++)
            for (int j = 0; j < n && !overlaps; j++)
                for (int i = 0; i < 3; i++)
                    overlaps |= used[u][i] == ids[j];
        if (overlaps)
            continue;
        memcpy(used[n_used++], ids, sizeof ids);
        int64_t surface = most_common_surface(views, n_texts, p->code, &seen);
        PyObject *name = surface < 0 ? NULL : spelt(names, surface);
        PyObject *pair = name != NULL ? Py_BuildValue("(Nd)", name, p->score) : NULL;
        if (pair == NULL || PyList_Append(out, pair)) {
            Py_XDECREF(pair);
            goto fail;
        }
        Py_DECREF(pair);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    for (Py_ssize_t i = 0; i < n_views; i++)
        if (views[i].obj != NULL)
            PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(order);
    PyMem_Free(seen.data);
    PyBuffer_Release(&users);
    return out;
}

/* ----- top_rows: the k largest of a topic matrix's cosines ------------------------------------ */

/* Whether (a, row ia) ranks before (b, row ib): the larger value first, the lower row on a tie; a
   NaN below every number. */
static int
ranks_before(float a, Py_ssize_t ia, float b, Py_ssize_t ib)
{
    int a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan)
        return a_nan && b_nan ? ia < ib : b_nan;
    if (a != b)
        return a > b;
    return ia < ib;
}

/* top_rows(sims, k) -> [row]: the rows of the k largest of `sims` (a contiguous buffer of float32),
   largest first, the lower row first on a tie (tree/assign.top_rows, whose numpy steps it replaces:
   a branching turn ranks thousands of topics for two dozen). One pass, the best k kept in order by
   insertion: a row enters only when it ranks before the k-th kept. */
static PyObject *
top_rows(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "y*n:top_rows", &view, &k))
        return NULL;
    if (view.len % (Py_ssize_t)sizeof(float)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "top_rows: the buffer is not of float32");
        return NULL;
    }
    const float *sims = (const float *)view.buf;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(float);
    if (k < 0)
        k = 0;
    if (k > n)
        k = n;
    float *vals = PyMem_Malloc((size_t)(k ? k : 1) * sizeof(float));
    Py_ssize_t *rows = PyMem_Malloc((size_t)(k ? k : 1) * sizeof(Py_ssize_t));
    if (vals == NULL || rows == NULL) {
        PyMem_Free(vals);
        PyMem_Free(rows);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n && k > 0; i++) {
        float v = sims[i];
        if (kept == k && !ranks_before(v, i, vals[k - 1], rows[k - 1]))
            continue;
        Py_ssize_t at = kept < k ? kept++ : k - 1;
        while (at > 0 && ranks_before(v, i, vals[at - 1], rows[at - 1])) {
            vals[at] = vals[at - 1];
            rows[at] = rows[at - 1];
            at--;
        }
        vals[at] = v;
        rows[at] = i;
    }
    PyBuffer_Release(&view);
    PyObject *out = PyList_New(kept);
    for (Py_ssize_t j = 0; out != NULL && j < kept; j++) {
        PyObject *row = PyLong_FromSsize_t(rows[j]);
        if (row == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, j, row);
    }
    PyMem_Free(vals);
    PyMem_Free(rows);
    return out;
}

/* ----- mean_into: a topic's centroid -------------------------------------------------------- */

/* mean_into(out, vecs) -> out: the mean of `vecs` (a list of contiguous float32 buffers of out's
   length) written into `out` (a writable float32 buffer), step for step as tree/topicdata.mean's
   numpy steps make it: the rows summed in order in float32 (numpy's reduce over the rows adds them
   one after another), then each sum divided by the count in double and rounded to float32 (numpy's
   true_divide of float32 by an integer runs in double). Placement takes ~80,000 centroids in a
   100k-turn import; the numpy steps cost ~6 us each. */
static PyObject *
mean_into(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *out_obj, *vecs;
    if (!PyArg_ParseTuple(args, "OO!:mean_into", &out_obj, &PyList_Type, &vecs))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(vecs);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "mean_into: no vectors");
        return NULL;
    }
    Py_buffer out;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (out.len % (Py_ssize_t)sizeof(float)) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "mean_into: the output is not of float32");
        return NULL;
    }
    float *sum = (float *)out.buf;
    Py_ssize_t d = out.len / (Py_ssize_t)sizeof(float);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_buffer row;
        if (PyObject_GetBuffer(PyList_GET_ITEM(vecs, i), &row, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            PyBuffer_Release(&out);
            return NULL;
        }
        const char *f = row.format ? row.format : "B";
        if (*f == '<' || *f == '=' || *f == '@')
            f++;
        if (row.len != out.len || strcmp(f, "f") != 0) {
            PyBuffer_Release(&row);
            PyBuffer_Release(&out);
            PyErr_SetString(PyExc_ValueError, "mean_into: a vector not of float32 or of another length");
            return NULL;
        }
        const float *v = (const float *)row.buf;
        if (i == 0)
            memcpy(sum, v, (size_t)d * sizeof(float));
        else
            for (Py_ssize_t j = 0; j < d; j++)
                sum[j] += v[j];
        PyBuffer_Release(&row);
    }
    double count = (double)n;
    for (Py_ssize_t j = 0; j < d; j++)
        sum[j] = (float)((double)sum[j] / count);
    PyBuffer_Release(&out);
    Py_INCREF(out_obj);
    return out_obj;
}

static PyMethodDef METHODS[] = {
    {"configure_artefacts", configure_artefacts, METH_VARARGS,
     "configure_artefacts(extensions, hex_run): see may_hold_artefact in the module's source."},
    {"may_hold_artefact", may_hold_artefact, METH_O,
     "may_hold_artefact(text) -> bool, or None for a text not ASCII: see the module's source."},
    {"key_pool", key_pool, METH_VARARGS,
     "key_pool(parts, m) -> [(term id, score, first)], best first: see the module's source."},
    {"surfaces", surfaces, METH_VARARGS,
     "surfaces(parts, terms, term_of) -> [form id] per term: see the module's source."},
    {"top_terms", top_terms, METH_VARARGS,
     "top_terms(parts, k, words) -> set of words: see the module's source."},
    {"phrases", phrases, METH_VARARGS,
     "phrases(text, memo) -> list of ((stems...), surface), or None: see the module's source."},
    {"phrase_codes", phrase_codes, METH_VARARGS,
     "phrase_codes(text, memo) -> bytes of (stem code, surface code) pairs, or None: see the"
     " module's source."},
    {"key_phrases", key_phrases, METH_VARARGS,
     "key_phrases(codes, users, many, k, rarity, names, strict, min_rarity) -> [(phrase, score)]:"
     " see the module's source."},
    {"mean_into", mean_into, METH_VARARGS,
     "mean_into(out, vecs) -> out: the float32 vectors' mean written into out, as numpy's steps"
     " make it: see the module's source."},
    {"top_rows", top_rows, METH_VARARGS,
     "top_rows(sims, k) -> [row]: the rows of the k largest float32 values, largest first, the"
     " lower row on a tie: see the module's source."},
    {"form_ids", form_ids, METH_VARARGS,
     "form_ids(texts, forms, tokens[, cache]) -> (ids, counts): see the module's source."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "memstore.tree._words",
    "A write's words, looked up a C loop at a time (see tree/termsets.py).", -1, METHODS,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__words(void)
{
    for (const char *c = "`[<@.hHwW"; *c; c++)
        STOP[(unsigned char)*c] = 1;
    for (int c = 0; c < 256; c++) {
        KIND[c] = ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))                 ? 1
                  : ((c >= '0' && c <= '9') || c == '_' || c == '\'' || c == '-') ? 2
                                                                                      : 0;
    }
    for (int c = 0; c < 128; c++) {
        int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
        int digit = c >= '0' && c <= '9';
        int space = c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
        START[c] = letter ? 1 : digit ? 2 : (space || c == '_' || c == '\'' || c == '-') ? 3 : 0;
        IN_WORD[c] = letter || digit || c == '_' || c == '\'' || c == '-';
        IN_NUMBER[c] = letter || digit || c == '_' || c == '.' || c == ',' || c == ':' || c == '/'
                       || c == '-';
    }
    PyObject *module = PyModule_Create(&MODULE);
    if (module != NULL
        && PyModule_AddIntConstant(module, "CACHE_BYTES", (long)(CACHE_SLOTS * sizeof(Slot))) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

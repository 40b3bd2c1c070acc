/* A tokenizer's vocabulary and tiktoken's byte-pair merge, in C (issue 32), for _pieces.c.
 *
 * A piece found in the vocabulary is one token; any other is merged from its bytes, the pair
 * of adjacent parts whose joined bytes have the lowest rank first (the leftmost of equal ranks),
 * until no joined pair is in the vocabulary: tiktoken's _byte_pair_merge, which this follows
 * line for line for short pieces; longer ones make the same merges in the same order from a
 * heap, in n log n. tests/test_pieces_compiled.py holds both to tiktoken's encode_single_piece.
 */
#include "_bpe.h"

#include <Python.h>
#include <string.h>

#define SHORT_PIECE 128

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void vocab_free(Vocab *v) {
    PyMem_Free(v->slots);
    v->slots = NULL;
    v->mask = v->size = 0;
}

uint32_t vocab_rank(const Vocab *v, const unsigned char *p, size_t n) {
    uint32_t h = piece_hash(p, n);
    for (size_t i = h & v->mask;; i = (i + 1) & v->mask) {
        const VocabSlot *s = &v->slots[i];
        if (!s->used)
            return NO_RANK;
        if (s->hash == h && s->len == n && same_bytes(v->data + s->off, p, n))
            return s->rank;
    }
}

int vocab_read(Vocab *v, const unsigned char *data, size_t size) {
    memset(v, 0, sizeof *v);
    if (size < 4)
        return -1;
    uint32_t n = u32_at(data);
    if (n == 0 || n > size / 6)
        return -1;
    size_t cap = 1;
    while (cap < (size_t)n * 2)
        cap *= 2;
    unsigned char *seen = PyMem_Calloc(n, 1);
    v->slots = PyMem_Calloc(cap, sizeof(VocabSlot));
    if (seen == NULL || v->slots == NULL) {
        PyMem_Free(seen);
        vocab_free(v);
        return -2;
    }
    v->data = data;
    v->mask = cap - 1;
    size_t off = 4;
    for (uint32_t k = 0; k < n; k++) {
        if (size - off < 2)
            goto bad;
        size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
        off += 2;
        if (size - off < len + 4 || len == 0)
            goto bad;
        uint32_t rank = u32_at(data + off + len);
        if (rank >= n || seen[rank])
            goto bad;
        seen[rank] = 1;
        uint32_t h = piece_hash(data + off, len);
        size_t i = h & v->mask;
        for (;; i = (i + 1) & v->mask) {
            VocabSlot *s = &v->slots[i];
            if (!s->used)
                break;
            if (s->hash == h && s->len == len && memcmp(data + s->off, data + off, len) == 0)
                goto bad; /* a token twice */
        }
        v->slots[i] = (VocabSlot){h, (uint32_t)off, rank, (uint16_t)len, 1};
        off += len + 4;
    }
    if (off != size)
        goto bad;
    PyMem_Free(seen);
    v->size = n;
    return 0;
bad:
    PyMem_Free(seen);
    vocab_free(v);
    return -1;
}

/* tiktoken's _byte_pair_merge, as written there, for a short piece. */
static long long merge_short(const Vocab *v, const unsigned char *piece, size_t n, uint32_t *out) {
    size_t start[SHORT_PIECE + 1];
    uint32_t rank[SHORT_PIECE + 1];
    size_t len = 0, min_i = 0;
    uint32_t min_rank = NO_RANK;
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = vocab_rank(v, piece + i, 2);
        if (r < min_rank) {
            min_rank = r;
            min_i = i;
        }
        start[len] = i;
        rank[len++] = r;
    }
    start[len] = n - 1;
    rank[len++] = NO_RANK;
    start[len] = n;
    rank[len++] = NO_RANK;
#define GET_RANK(i) ((i) + 3 < len ? vocab_rank(v, piece + start[i], start[(i) + 3] - start[i]) : NO_RANK)
    while (min_rank != NO_RANK) {
        size_t i = min_i;
        if (i > 0)
            rank[i - 1] = GET_RANK(i - 1);
        rank[i] = GET_RANK(i);
        memmove(start + i + 1, start + i + 2, (len - i - 2) * sizeof start[0]);
        memmove(rank + i + 1, rank + i + 2, (len - i - 2) * sizeof rank[0]);
        len--;
        min_rank = NO_RANK;
        for (size_t j = 0; j + 1 < len; j++)
            if (rank[j] < min_rank) {
                min_rank = rank[j];
                min_i = j;
            }
    }
#undef GET_RANK
    if (out != NULL)
        for (size_t j = 0; j + 1 < len; j++)
            out[j] = vocab_rank(v, piece + start[j], start[j + 1] - start[j]);
    return (long long)len - 1;
}

/* The same merges from a min-heap of (rank, start): the lowest rank first, the leftmost of
 * equal ranks (starts keep their order through merges). An entry is current while its part is
 * alive and its pair's rank is still the one pushed (one rank is one token, so one length). */
static void heap_push(uint64_t *heap, size_t *len, uint64_t key) {
    size_t i = (*len)++;
    while (i > 0 && heap[(i - 1) / 2] > key) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = key;
}

static uint64_t heap_pop(uint64_t *heap, size_t *len) {
    uint64_t top = heap[0], last = heap[--(*len)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *len)
            break;
        if (c + 1 < *len && heap[c + 1] < heap[c])
            c++;
        if (heap[c] >= last)
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (*len > 0)
        heap[i] = last;
    return top;
}

static long long merge_long(const Vocab *v, const unsigned char *piece, size_t n, uint32_t *out) {
    size_t *next = PyMem_Malloc(n * sizeof(size_t)), *prev = PyMem_Malloc(n * sizeof(size_t));
    uint32_t *pair = PyMem_Malloc(n * sizeof(uint32_t));
    uint64_t *heap = PyMem_Malloc(3 * n * sizeof(uint64_t)); /* n pushes, then at most 2 per merge */
    unsigned char *alive = PyMem_Malloc(n);
    long long count = -1;
    if (next == NULL || prev == NULL || pair == NULL || heap == NULL || alive == NULL)
        goto done;
    size_t hlen = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1;
        prev[i] = i - 1; /* SIZE_MAX for the first */
        alive[i] = 1;
        pair[i] = i + 1 < n ? vocab_rank(v, piece + i, 2) : NO_RANK;
        if (pair[i] != NO_RANK)
            heap_push(heap, &hlen, (uint64_t)pair[i] << 32 | i);
    }
    count = (long long)n;
    while (hlen > 0) {
        uint64_t top = heap_pop(heap, &hlen);
        size_t p = (size_t)(top & 0xFFFFFFFFu);
        uint32_t r = (uint32_t)(top >> 32);
        if (!alive[p] || pair[p] != r)
            continue;
        size_t q = next[p];
        alive[q] = 0;
        next[p] = next[q];
        if (next[q] < n)
            prev[next[q]] = p;
        count--;
        for (int side = 0; side < 2; side++) {
            size_t a = side == 0 ? p : prev[p];
            if (a == (size_t)-1)
                continue;
            size_t b = next[a], c = b < n ? next[b] : n;
            pair[a] = b < n ? vocab_rank(v, piece + a, c - a) : NO_RANK;
            if (pair[a] != NO_RANK)
                heap_push(heap, &hlen, (uint64_t)pair[a] << 32 | a);
        }
    }
    if (out != NULL)
        for (size_t p = 0, j = 0; p < n; p = next[p])
            out[j++] = vocab_rank(v, piece + p, next[p] - p);
done:
    PyMem_Free(next);
    PyMem_Free(prev);
    PyMem_Free(pair);
    PyMem_Free(heap);
    PyMem_Free(alive);
    if (count < 0)
        PyErr_NoMemory();
    return count;
}

long long bpe_tokens(const Vocab *v, const unsigned char *piece, size_t n, uint32_t *out) {
    if (n == 0)
        return 0;
    uint32_t whole = vocab_rank(v, piece, n);
    if (whole != NO_RANK) {
        if (out != NULL)
            out[0] = whole;
        return 1;
    }
    if (n <= SHORT_PIECE)
        return merge_short(v, piece, n, out);
    return merge_long(v, piece, n, out);
}

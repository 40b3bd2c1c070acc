/* A tokenizer's vocabulary and tiktoken's byte-pair merge, in C (model/_bpe.c), for _pieces.c. */
#ifndef XCOMPACT_BPE_H
#define XCOMPACT_BPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NO_RANK UINT32_MAX

/* A hash of a short byte string, eight bytes a step (pieces and tokens are a few bytes long). */
static inline uint32_t piece_hash(const unsigned char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
                     (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return (uint32_t)(h ^ (h >> 29));
}

/* a[:n] == b[:n], without a call for the short ones. */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, size_t n) {
    if (n > 16)
        return memcmp(a, b, n) == 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

typedef struct {
    uint32_t hash, off, rank;
    uint16_t len, used;
} VocabSlot;

typedef struct {
    const unsigned char *data; /* the .vocab file's bytes (kept alive by the owner) */
    VocabSlot *slots;
    size_t mask, size;
} Vocab;

/* Reads a quicktok .vocab file (u32 count, then per token a u16 length, its bytes and a u32
 * rank, little-endian): 0, or -1 unless every byte is used, the tokens are distinct and the ranks
 * are 0..n-1 once each (the file encoders.read_ranks accepts). -2: out of memory. */
int vocab_read(Vocab *v, const unsigned char *data, size_t size);
void vocab_free(Vocab *v);
uint32_t vocab_rank(const Vocab *v, const unsigned char *p, size_t n);

/* The number of tokens tiktoken's encode_single_piece makes of a piece, and their ranks in
 * ``out`` when it is not NULL (room for n). -1: out of memory. */
long long bpe_tokens(const Vocab *v, const unsigned char *piece, size_t n, uint32_t *out);

#endif

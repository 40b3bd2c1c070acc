/* A tokenizer's vocabulary and tiktoken's byte-pair merge, in C (model/_bpe.c), for _pieces.c. */
#ifndef XCOMPACT_BPE_H
#define XCOMPACT_BPE_H

#include <stddef.h>
#include <stdint.h>

#define NO_RANK UINT32_MAX

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

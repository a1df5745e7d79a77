/* A small bytecode interpreter, the shape of the interpreters people
 * profile: a loop that dispatches each instruction through a table of
 * handler functions (an indirect call whose target changes from one
 * instruction to the next), handlers that allocate, hash and format
 * values through small helper functions and the C library.
 *
 *     dispatch [ROUNDS]    (default 20000)
 *
 * Prints a checksum of the interpreted program's results, so that a run
 * under a profiler can be checked against a native one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STACK = 64, TABLE = 1024 };

struct value {
    long number;
    char *text;
};

struct machine {
    struct value stack[STACK];
    int top;
    struct value table[TABLE];
    unsigned long checksum;
};

typedef void (*handler)(struct machine *, int);

static unsigned hash(const char *text) {
    unsigned h = 2166136261u;
    for (; *text; text++)
        h = (h ^ (unsigned char)*text) * 16777619u;
    return h;
}

static char *copy_text(const char *text) {
    size_t length = strlen(text);
    char *copy = malloc(length + 1);
    if (!copy)
        exit(1);
    memcpy(copy, text, length + 1);
    return copy;
}

static void release(struct value *value) {
    free(value->text);
    value->text = NULL;
}

static void push(struct machine *m, long number, char *text) {
    m->top = (m->top + 1) % STACK;
    release(&m->stack[m->top]);
    m->stack[m->top].number = number;
    m->stack[m->top].text = text;
}

static struct value *peek(struct machine *m) {
    return &m->stack[m->top];
}

static void op_number(struct machine *m, int arg) {
    push(m, arg, NULL);
}

static void op_add(struct machine *m, int arg) {
    long right = peek(m)->number;
    m->top = (m->top + STACK - 1) % STACK;
    peek(m)->number += right + arg;
}

static void op_multiply(struct machine *m, int arg) {
    peek(m)->number = peek(m)->number * (arg | 1) % 1000003;
}

static void op_format(struct machine *m, int arg) {
    char text[48];
    snprintf(text, sizeof text, "v%ld-%d", peek(m)->number, arg);
    push(m, (long)strlen(text), copy_text(text));
}

static void op_store(struct machine *m, int arg) {
    struct value *value = peek(m);
    unsigned slot = (value->text ? hash(value->text) : (unsigned)value->number + (unsigned)arg) % TABLE;
    release(&m->table[slot]);
    m->table[slot].number = value->number;
    m->table[slot].text = value->text ? copy_text(value->text) : NULL;
}

static void op_load(struct machine *m, int arg) {
    struct value *value = &m->table[(unsigned)(arg * 37 + m->top) % TABLE];
    push(m, value->number, value->text ? copy_text(value->text) : NULL);
}

static void op_compare(struct machine *m, int arg) {
    struct value *a = peek(m), *b = &m->stack[(m->top + STACK - 1) % STACK];
    int order = (a->text && b->text) ? strcmp(a->text, b->text) : (a->number > b->number) - (a->number < b->number);
    m->checksum = m->checksum * 31 + (unsigned long)(order + arg);
}

static void op_sum(struct machine *m, int arg) {
    m->checksum += (unsigned long)peek(m)->number + (unsigned long)arg;
}

static const handler handlers[] = {op_number, op_add, op_multiply, op_format,
                                   op_store, op_load, op_compare, op_sum};

struct instruction {
    unsigned char op;
    int arg;
};

static void run(struct machine *m, const struct instruction *code, int length) {
    for (int pc = 0; pc < length; pc++)
        handlers[code[pc].op](m, code[pc].arg);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20000;
    enum { LENGTH = 97 };
    static struct instruction code[LENGTH];
    static struct machine m;
    unsigned seed = 12345;
    for (int i = 0; i < LENGTH; i++) {
        seed = seed * 1103515245u + 12345u;
        code[i].op = (unsigned char)((seed >> 16) % (sizeof handlers / sizeof handlers[0]));
        code[i].arg = (int)((seed >> 8) % 100);
    }
    for (int round = 0; round < rounds; round++) {
        code[round % LENGTH].arg = round % 100;
        run(&m, code, LENGTH);
    }
    printf("%lu\n", m.checksum);
    for (int i = 0; i < STACK; i++)
        release(&m.stack[i]);
    for (int i = 0; i < TABLE; i++)
        release(&m.table[i]);
    return 0;
}

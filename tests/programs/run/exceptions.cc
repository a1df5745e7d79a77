// Acceptance 2 of `cgx run`: a small C++ program whose exceptions are thrown
// through a couple of frames, with a cleanup (a destructor) in some of them, and
// caught (the unwinder pops the frames without returns); with recursion and calls
// through virtual functions. It prints the
// same lines and exits with 5 under any profiler. noipa keeps g++ from inlining
// or cloning the calls.
#include <cstdio>
#include <stdexcept>

namespace shapes {

struct Shape {
    virtual ~Shape() = default;
    virtual unsigned long area(unsigned long size) const = 0;
};

struct Square : Shape {
    __attribute__((noipa)) unsigned long area(unsigned long size) const override
    {
        return size * size;
    }
};

struct Strip : Shape {
    __attribute__((noipa)) unsigned long area(unsigned long size) const override
    {
        return 2 * size;
    }
};

} // namespace shapes

__attribute__((noipa)) static unsigned long fib(unsigned long n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

// Counts the frames of check() left, by return or by the unwinder: a cleanup
// the unwinder runs in each frame it pops.
static unsigned long guards;

struct Guard {
    __attribute__((noipa)) Guard() { guards += 100; }
    __attribute__((noipa)) ~Guard() { guards++; }
};

__attribute__((noipa)) static unsigned long check(unsigned long depth)
{
    Guard guard;
    if (depth == 0)
        throw std::runtime_error("bottom reached");
    return check(depth - 1) + 1;
}

__attribute__((noipa)) static unsigned long middle(unsigned long depth)
{
    return check(depth) * 2;
}

__attribute__((noipa)) static int attempt(unsigned long depth)
{
    try {
        return (int)middle(depth);
    } catch (const std::runtime_error &error) {
        return -(int)depth;
    }
}

int main()
{
    shapes::Square square;
    shapes::Strip strip;
    const shapes::Shape *all[] = {&square, &strip};
    // Enough own work that start-up, which differs under Valgrind, is
    // under 2% of the total.
    unsigned long total = fib(24);
    for (unsigned long i = 0; i < 10; i++)
        total += all[i % 2]->area(i);
    std::printf("total: %lu\n", total);
    for (unsigned long depth = 1; depth <= 3; depth++)
        std::printf("attempt %lu: %d\n", depth, attempt(depth));
    std::printf("guards: %lu\n", guards);
    return 5;
}

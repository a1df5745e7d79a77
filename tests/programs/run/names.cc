/* Functions whose demangled names differ between demanglers: Valgrind's
   (GNU libiberty's) are the reference. */
#include <cstdio>
namespace outer {
struct Type {
    struct Result {
        int v;
    };
};
struct Finder {
    __attribute__((noinline)) int find(const Type *type, Type::Result &result) const
    {
        result.v = type != nullptr;
        return result.v;
    }
};
}
template <typename A, typename... T> __attribute__((noinline)) int count_args(A a, T... rest)
{
    return a + (int)sizeof...(rest);
}
int main()
{
    outer::Type type;
    outer::Type::Result result{0};
    outer::Finder finder;
    std::printf("%d %d\n", finder.find(&type, result), count_args<int>(1));
    return 0;
}

/* A static inline function in a header. Built with -O2 -g its code is inlined
   into its callers, so Valgrind writes the cost of those instructions under
   fi=/fe= lines naming this file. */
static inline unsigned mix(unsigned x)
{
    for (int i = 0; i < 8; i++)
        x = x * 2654435761u + (x >> 13);
    return x;
}

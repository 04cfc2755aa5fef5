// ember-gpu-check: placeholder; the GPU-vs-CPU self-check and benchmark follow.
int main() { return 0; }

# A JAX job for the owners check: a jitted MLP step on the GPU. Writes XLA's own memory_stats() at the end to LABEL
# (JSON): with the default preallocation the BFC allocator reserves its pool (bytes_limit) at start.
# usage: python3 jax_job.py LABEL.json
import json, sys
import jax, jax.numpy as jnp

key = jax.random.PRNGKey(0)
w1 = jax.random.normal(key, (2048, 2048))
w2 = jax.random.normal(key, (2048, 10))

@jax.jit
def step(w1, w2, x):
    def loss(w1, w2):
        return jnp.mean((jnp.tanh(x @ w1) @ w2) ** 2)
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 1e-3 * g1, w2 - 1e-3 * g2

for i in range(5):
    x = jax.random.normal(jax.random.PRNGKey(i), (512, 2048))
    w1, w2 = step(w1, w2, x)
w1.block_until_ready()
stats = jax.devices()[0].memory_stats()
label = {"job": "jax", "memory_stats": {k: int(v) for k, v in stats.items()}, "jax": jax.__version__}
json.dump(label, open(sys.argv[1], "w"), indent=1)
print(label)

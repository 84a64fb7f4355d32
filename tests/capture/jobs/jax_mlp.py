# Proof job 5: a jitted JAX MLP training step, XLA's default preallocation. Label: XLA's own memory_stats().
# usage: python3 jax_mlp.py LABEL.json
import os, sys
import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Label

dev = jax.devices()[0]
label = Label("jax_mlp", __file__, lambda: jax.effects_barrier())
k = jax.random.PRNGKey(0)
params = [jax.random.normal(k, (1024, 4096)) * 0.02, jax.random.normal(k, (4096, 4096)) * 0.02,
          jax.random.normal(k, (4096, 10)) * 0.02]


@jax.jit
def step(params, x, y):
    def loss(ps):
        h = x
        for w in ps[:-1]:
            h = jax.nn.relu(h @ w)
        return jnp.mean((h @ ps[-1] - y) ** 2)
    grads = jax.grad(loss)(params)
    return [p - 1e-3 * g for p, g in zip(params, grads)]


for i in range(20):
    x = jax.random.normal(jax.random.PRNGKey(i), (2048, 1024))
    y = jax.random.normal(jax.random.PRNGKey(i + 1), (2048, 10))
    label.step_start()
    params = step(params, x, y)
    jax.block_until_ready(params)
    label.step_end()
stats = dev.memory_stats() or {}
label.write(memory_stats={key: int(v) for key, v in stats.items()}, jax=jax.__version__)

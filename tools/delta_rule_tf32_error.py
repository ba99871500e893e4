"""The error of the CUDA chunked gated delta rule's formulation, in numpy, against the recurrent rule in fp64.

Follows kernels/cuda/delta_net/delta_rule_chunked.cu's order of operations (chunks of 64; per chunk L, T = (I + L)^-1
by forward substitution, W, U, the causal attention A and the row factors fq, fk; then V' = U - W S,
O = diag(fq) Q S + A V', S <- e^{G_last} S + (diag(fk) K)^T V'), with the operands of every matrix product rounded to
TF32 as cvt.rna.tf32.f32 does (10-bit mantissa, ties away from zero) and everything else in fp64. First without the
rounding (the algebra: errors at fp64 rounding), then with it: the error the kernels' products alone cause, which
sets the op harness's kChunkedTol (tests/unit/ops/op_cases.cpp). Data as the harness draws it: q, k, v uniform in
[-1, 1] (q, k L2-normalised as the fused kernels do), g = -0.5·decay·(1 + u), beta = 0.5 + 0.45·u, state 0.1·u.

    /work/main/.venv/bin/python tools/delta_rule_tf32_error.py
"""

import numpy as np

CHUNK = 64


def tf32(x):
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


def recurrent(q, k, v, g, beta, S, q_scale):
    out = np.zeros_like(v)
    for t in range(len(q)):
        S = np.exp(g[t]) * S
        S = S + np.outer(k[t], beta[t] * (v[t] - S.T @ k[t]))
        out[t] = S.T @ (q[t] * q_scale)
    return out, S


def chunked(q_raw, k_raw, v, g, beta, S, q_scale, round_operands, eps=1e-6):
    mm = (lambda a, b: tf32(a) @ tf32(b)) if round_operands else (lambda a, b: a @ b)
    T, dk = q_raw.shape
    out = np.zeros_like(v)
    for t0 in range(0, T, CHUNK):
        n = min(CHUNK, T - t0)
        G = np.zeros(CHUNK)
        G[:n] = np.cumsum(g[t0:t0 + n])
        G[n:] = G[n - 1]
        B = np.zeros(CHUNK)
        B[:n] = beta[t0:t0 + n]
        K = np.zeros((CHUNK, dk))
        K[:n] = k_raw[t0:t0 + n]
        Q = np.zeros((CHUNK, dk))
        Q[:n] = q_raw[t0:t0 + n]
        rk = 1 / np.sqrt((K * K).sum(1) + eps)
        rq = q_scale / np.sqrt((Q * Q).sum(1) + eps)
        Kh = K * rk[:, None]
        i, j = np.meshgrid(np.arange(CHUNK), np.arange(CHUNK), indexing="ij")
        decay = np.exp(np.minimum(G[:, None] - G[None, :], 0))
        L = np.where((i > j) & (i < n), B[:, None] * mm(Kh, Kh.T) * decay, 0)
        A = np.where((j <= i) & (i < n), rq[:, None] * mm(Q, Kh.T) * decay, 0)
        Tm = np.eye(CHUNK)
        for r in range(1, n):
            Tm[r, :r] = -(L[r, :r] @ Tm[:r, :r])
        W = mm(Tm, (B * np.exp(G))[:, None] * Kh)
        V = np.zeros((CHUNK, v.shape[1]))
        V[:n] = v[t0:t0 + n]
        U = mm(Tm, B[:, None] * V)
        W[n:] = 0
        U[n:] = 0
        fq = np.where(np.arange(CHUNK) < n, np.exp(G) * rq, 0)
        fk = np.where(np.arange(CHUNK) < n, np.exp(G[n - 1] - G) * rk, 0)
        Vn = U - mm(W, S)
        out[t0:t0 + n] = (fq[:, None] * mm(Q, S) + mm(A, Vn))[:n]
        S = np.exp(G[n - 1]) * S + mm((fk[:, None] * K).T, Vn)
    return out, S


def main():
    rng = np.random.default_rng(0)
    for T, dk, dv, decay in [(1, 32, 48, 1), (2, 32, 48, 1), (65, 32, 40, 1), (64, 128, 128, 1), (130, 32, 48, 1),
                             (1000, 128, 128, 1), (1000, 128, 128, 0.02), (4097, 128, 32, 0.02),
                             (4097, 128, 32, 0.002)]:
        q, k = rng.uniform(-1, 1, (T, dk)), rng.uniform(-1, 1, (T, dk))
        v = rng.uniform(-1, 1, (T, dv))
        g = -0.5 * decay * (1 + rng.uniform(-1, 1, T))
        beta = 0.5 + 0.45 * rng.uniform(-1, 1, T)
        S0 = 0.1 * rng.uniform(-1, 1, (dk, dv))
        q_scale = dk**-0.5
        qn = q / np.sqrt((q * q).sum(1, keepdims=True) + 1e-6)
        kn = k / np.sqrt((k * k).sum(1, keepdims=True) + 1e-6)
        o_ref, s_ref = recurrent(qn, kn, v, g, beta, S0, q_scale)
        errors = []
        for round_operands in (False, True):
            o, s = chunked(q, k, v, g, beta, S0, q_scale, round_operands)
            errors += [abs(o - o_ref).max() / abs(o_ref).max(), abs(s - s_ref).max() / abs(s_ref).max()]
        print(f"T={T} dk={dk} dv={dv} decay={decay}: fp64 out {errors[0]:.2g} state {errors[1]:.2g}; "
              f"TF32 operands out {errors[2]:.2g} state {errors[3]:.2g}")


if __name__ == "__main__":
    main()

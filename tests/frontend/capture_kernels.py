"""Numpy kernels written as users write them (the algorithms of npbench's numpy versions, this
project's own code): time-stepping stencils, factorisations, dynamic programming, a CRC, loops over
output pixels. tests/frontend/test_capture_kernels.py checks that they compile with their loops
captured where they can be and agree with plain numpy; docs/control-flow.md has their figures."""

import numpy as np


def jacobi_1d(steps, a, b):
    for _ in range(1, steps):
        b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        a[1:-1] = 0.33333 * (b[:-2] + b[1:-1] + b[2:])


def heat_3d(steps, a, b):
    for _ in range(1, steps):
        b[1:-1, 1:-1, 1:-1] = (0.125 * (a[2:, 1:-1, 1:-1] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[:-2, 1:-1, 1:-1])
                               + 0.125 * (a[1:-1, 2:, 1:-1] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[1:-1, :-2, 1:-1])
                               + 0.125 * (a[1:-1, 1:-1, 2:] - 2.0 * a[1:-1, 1:-1, 1:-1] + a[1:-1, 1:-1, :-2])
                               + a[1:-1, 1:-1, 1:-1])
        a[1:-1, 1:-1, 1:-1] = (0.125 * (b[2:, 1:-1, 1:-1] - 2.0 * b[1:-1, 1:-1, 1:-1] + b[:-2, 1:-1, 1:-1])
                               + 0.125 * (b[1:-1, 2:, 1:-1] - 2.0 * b[1:-1, 1:-1, 1:-1] + b[1:-1, :-2, 1:-1])
                               + 0.125 * (b[1:-1, 1:-1, 2:] - 2.0 * b[1:-1, 1:-1, 1:-1] + b[1:-1, 1:-1, :-2])
                               + b[1:-1, 1:-1, 1:-1])


def seidel_2d(steps, a):
    n = a.shape[0]
    for _ in range(steps - 1):
        for i in range(1, n - 1):
            a[i, 1:-1] += (a[i - 1, :-2] + a[i - 1, 1:-1] + a[i - 1, 2:] + a[i, 2:] + a[i + 1, :-2]
                           + a[i + 1, 1:-1] + a[i + 1, 2:])
            for j in range(1, n - 1):
                a[i, j] += a[i, j - 1]
                a[i, j] /= 9.0


def floyd_warshall(path):
    for k in range(path.shape[0]):
        path[:] = np.minimum(path, np.add.outer(path[:, k], path[k, :]))


def gramschmidt(a):
    m, n = a.shape
    q = np.zeros_like(a)
    r = np.zeros((n, n), dtype=a.dtype)
    for k in range(n):
        norm = np.dot(a[:, k], a[:, k])
        r[k, k] = np.sqrt(norm)
        q[:, k] = a[:, k] / r[k, k]
        for j in range(k + 1, n):
            r[k, j] = np.dot(q[:, k], a[:, j])
            a[:, j] -= q[:, k] * r[k, j]
    return q, r


def deriche(alpha, img):
    k = (1.0 - np.exp(-alpha)) ** 2 / (1.0 + 2.0 * alpha * np.exp(-alpha) - np.exp(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * np.exp(-alpha) * (alpha - 1.0)
    a3 = a7 = k * np.exp(-alpha) * (alpha + 1.0)
    a4 = a8 = -k * np.exp(-2.0 * alpha)
    b1 = 2.0 ** (-alpha)
    b2 = -np.exp(-2.0 * alpha)
    w, h = img.shape
    y1 = np.empty_like(img)
    y2 = np.empty_like(img)
    ym1, ym2, xm1 = np.zeros(w, img.dtype), np.zeros(w, img.dtype), np.zeros(w, img.dtype)
    for j in range(h):
        y1[:, j] = a1 * img[:, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
        xm1 = img[:, j].copy()
        ym2 = ym1
        ym1 = y1[:, j].copy()
    yp1, yp2, xp1, xp2 = np.zeros(w, img.dtype), np.zeros(w, img.dtype), np.zeros(w, img.dtype), np.zeros(w, img.dtype)
    for j in range(h - 1, -1, -1):
        y2[:, j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
        xp2 = xp1
        xp1 = img[:, j].copy()
        yp2 = yp1
        yp1 = y2[:, j].copy()
    return a5 * y1 + a6 * y2, a7, a8


def adi(steps, u):
    n = u.shape[0]
    v, p, q = np.empty_like(u), np.empty_like(u), np.empty_like(u)
    dx, dy, dt = 1.0 / n, 1.0 / n, 1.0 / steps
    mul1, mul2 = 2.0 * dt / dx ** 2, dt / dy ** 2
    a, b, c = -mul1 / 2.0, 1.0 + mul1, -mul1 / 2.0
    d, e, f = -mul2 / 2.0, 1.0 + mul2, -mul2 / 2.0
    for _ in range(1, steps + 1):
        v[0, 1:n - 1] = 1.0
        p[1:n - 1, 0] = 0.0
        q[1:n - 1, 0] = v[0, 1:n - 1]
        for j in range(1, n - 1):
            p[1:n - 1, j] = -c / (a * p[1:n - 1, j - 1] + b)
            q[1:n - 1, j] = (-d * u[j, 0:n - 2] + (1.0 + 2.0 * d) * u[j, 1:n - 1] - f * u[j, 2:n]
                             - a * q[1:n - 1, j - 1]) / (a * p[1:n - 1, j - 1] + b)
        v[n - 1, 1:n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, 1:n - 1] = p[1:n - 1, j] * v[j + 1, 1:n - 1] + q[1:n - 1, j]
        u[1:n - 1, 0] = 1.0
        p[1:n - 1, 0] = 0.0
        q[1:n - 1, 0] = u[1:n - 1, 0]
        for j in range(1, n - 1):
            p[1:n - 1, j] = -f / (d * p[1:n - 1, j - 1] + e)
            q[1:n - 1, j] = (-a * v[0:n - 2, j] + (1.0 + 2.0 * a) * v[1:n - 1, j] - c * v[2:n, j]
                             - d * q[1:n - 1, j - 1]) / (d * p[1:n - 1, j - 1] + e)
        u[1:n - 1, n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            u[1:n - 1, j] = p[1:n - 1, j] * u[1:n - 1, j + 1] + q[1:n - 1, j]


def cholesky(a):
    n = a.shape[0]
    a[0, 0] = np.sqrt(a[0, 0])
    for i in range(1, n):
        for j in range(i):
            a[i, j] -= np.dot(a[i, :j], a[j, :j])
            a[i, j] /= a[j, j]
        a[i, i] -= np.dot(a[i, :i], a[i, :i])
        a[i, i] = np.sqrt(a[i, i])


def lu(a):
    n = a.shape[0]
    for i in range(n):
        for j in range(i):
            a[i, j] -= a[i, :j] @ a[:j, j]
            a[i, j] /= a[j, j]
        for j in range(i, n):
            a[i, j] -= a[i, :i] @ a[:i, j]


def trisolv(lower, x, b):
    for i in range(x.shape[0]):
        x[i] = (b[i] - lower[i, :i] @ x[:i]) / lower[i, i]


def durbin(r):
    n = r.shape[0]
    y = np.empty_like(r)
    alpha = -r[0]
    beta = 1.0
    y[0] = -r[0]
    for k in range(1, n):
        beta *= 1.0 - alpha * alpha
        alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
        y[:k] += alpha * np.flip(y[:k])
        y[k] = alpha
    return y


def covariance(float_n, data):
    m = data.shape[1]
    mean = np.mean(data, axis=0)
    data -= mean
    cov = np.zeros((m, m), dtype=data.dtype)
    for i in range(m):
        cov[i:m, i] = data[:, i] @ data[:, i:m] / (float_n - 1.0)
        cov[i, i:m] = cov[i:m, i]
    return cov


def correlation(float_n, data):
    m = data.shape[1]
    mean = np.mean(data, axis=0)
    stddev = np.std(data, axis=0)
    stddev[stddev <= 0.1] = 1.0
    data -= mean
    data /= np.sqrt(float_n) * stddev
    corr = np.eye(m, dtype=data.dtype)
    for i in range(m - 1):
        corr[i + 1:m, i] = data[:, i] @ data[:, i + 1:m]
        corr[i, i + 1:m] = corr[i + 1:m, i]
    return corr


def syrk(alpha, beta, c, a):
    for i in range(a.shape[0]):
        c[i, :i + 1] *= beta
        for k in range(a.shape[1]):
            c[i, :i + 1] += alpha * a[i, k] * a[:i + 1, k]


def syr2k(alpha, beta, c, a, b):
    for i in range(a.shape[0]):
        c[i, :i + 1] *= beta
        for k in range(a.shape[1]):
            c[i, :i + 1] += a[:i + 1, k] * alpha * b[i, k] + b[:i + 1, k] * alpha * a[i, k]


def symm(alpha, beta, c, a, b):
    temp2 = np.empty_like(c[0, :])
    c *= beta
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            c[:i, j] += alpha * b[i, j] * a[i, :i]
            temp2[j] = b[:i, j] @ a[i, :i]
        c[i, :] += alpha * b[i, :] * a[i, i] + alpha * temp2


def nussinov(seq):
    n = seq.shape[0]
    table = np.zeros((n, n), np.int32)
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            if j - 1 >= 0:
                table[i, j] = np.maximum(table[i, j], table[i, j - 1])
            if i + 1 < n:
                table[i, j] = np.maximum(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < n:
                if i < j - 1:
                    paired = (seq[i] + seq[j] == 3).astype(np.int32)
                    table[i, j] = np.maximum(table[i, j], table[i + 1, j - 1] + paired)
                else:
                    table[i, j] = np.maximum(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = np.maximum(table[i, j], table[i, k] + table[k + 1, j])
    return table


def crc16(data):
    crc = 0xFFFF
    for i in range(data.shape[0]):
        byte = data[i] & 0xFF
        for _ in range(8):
            if (crc & 0x0001) ^ (byte & 0x0001):
                crc = (crc >> 1) ^ 0x8408
            else:
                crc = crc >> 1
            byte = byte >> 1
    crc = ~crc & 0xFFFF
    crc = (crc << 8) | ((crc >> 8) & 0xFF)
    return crc & 0xFFFF


def contour_integral(ham, points, y):
    nr, nm = y.shape
    slabs = ham.shape[0] - 1
    p0 = np.zeros((nr, nm), ham.dtype)
    p1 = np.zeros((nr, nm), ham.dtype)
    for idx in range(points.shape[0]):
        z = points[idx]
        tz = np.zeros((nr, nr), ham.dtype)
        for n in range(slabs + 1):
            tz += z ** (slabs / 2 - n) * ham[n]
        x = np.linalg.solve(tz, y)
        if np.abs(z) < 1.0:
            x = -x
        p0 += x
        p1 += z * x
    return p0, p1


def azimint_naive(data, radius, npt):
    rmax = radius.max()
    res = np.zeros(npt, dtype=np.float64)
    for i in range(npt):
        r1 = rmax * i / npt
        r2 = rmax * (i + 1) / npt
        in_ring = np.logical_and(r1 <= radius, radius < r2)
        res[i] = np.where(in_ring, data, 0.0).sum() / np.maximum(in_ring.sum(), 1)
    return res


def conv2d_bias(image, weights, bias):
    k = weights.shape[0]
    n, h, w = image.shape[0], image.shape[1] - k + 1, image.shape[2] - k + 1
    out = np.empty((n, h, w, weights.shape[3]), image.dtype)
    for i in range(h):
        for j in range(w):
            out[:, i, j, :] = np.sum(image[:, i:i + k, j:j + k, :, np.newaxis] * weights[np.newaxis, :, :, :],
                                     axis=(1, 2, 3))
    return out + bias


def cavity_flow(nt, nit, u, v, p, dt, dx, dy, rho, nu):
    b = np.zeros_like(p)
    for _ in range(nt):
        un, vn = u.copy(), v.copy()
        b[1:-1, 1:-1] = rho * (1 / dt * ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx) + (v[2:, 1:-1] - v[0:-2, 1:-1])
                                         / (2 * dy)) - ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx)) ** 2
                               - 2 * ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2 * dy) * (v[1:-1, 2:] - v[1:-1, 0:-2])
                                      / (2 * dx)) - ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy)) ** 2)
        for _ in range(nit):
            pn = p.copy()
            p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy ** 2 + (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx ** 2)
                             / (2 * (dx ** 2 + dy ** 2)) - dx ** 2 * dy ** 2 / (2 * (dx ** 2 + dy ** 2))
                             * b[1:-1, 1:-1])
            p[:, -1] = p[:, -2]
            p[0, :] = p[1, :]
            p[:, 0] = p[:, 1]
            p[-1, :] = 0
        u[1:-1, 1:-1] = (un[1:-1, 1:-1] - un[1:-1, 1:-1] * dt / dx * (un[1:-1, 1:-1] - un[1:-1, 0:-2])
                         - vn[1:-1, 1:-1] * dt / dy * (un[1:-1, 1:-1] - un[0:-2, 1:-1])
                         - dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, 0:-2])
                         + nu * (dt / dx ** 2 * (un[1:-1, 2:] - 2 * un[1:-1, 1:-1] + un[1:-1, 0:-2])
                                 + dt / dy ** 2 * (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1])))
        v[1:-1, 1:-1] = (vn[1:-1, 1:-1] - un[1:-1, 1:-1] * dt / dx * (vn[1:-1, 1:-1] - vn[1:-1, 0:-2])
                         - vn[1:-1, 1:-1] * dt / dy * (vn[1:-1, 1:-1] - vn[0:-2, 1:-1])
                         - dt / (2 * rho * dy) * (p[2:, 1:-1] - p[0:-2, 1:-1])
                         + nu * (dt / dx ** 2 * (vn[1:-1, 2:] - 2 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2])
                                 + dt / dy ** 2 * (vn[2:, 1:-1] - 2 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))
        u[0, :] = 0
        u[:, 0] = 0
        u[:, -1] = 0
        u[-1, :] = 1
        v[0, :] = 0
        v[-1, :] = 0
        v[:, 0] = 0
        v[:, -1] = 0


def converge(u, tol):
    """A convergence loop on a traced value (the cavity solver's `while udiff > tol`)."""
    diff = 1.0
    steps = 0
    while diff > tol:
        un = u.copy()
        u[1:-1] = 0.5 * (un[:-2] + un[2:])
        diff = np.abs(u - un).max()
        steps += 1
    return steps


# LeNet-5 and a ResNet bottleneck block as npbench writes them: helper functions whose loops run over
# output pixels (each a loop in a function the model calls: captured since helpers are converted)
def _conv2d(x, w):
    k = w.shape[0]
    h, wd = x.shape[1] - k + 1, x.shape[2] - k + 1
    out = np.empty((x.shape[0], h, wd, w.shape[3]), x.dtype)
    for i in range(h):
        for j in range(wd):
            out[:, i, j, :] = np.sum(x[:, i:i + k, j:j + k, :, np.newaxis] * w[np.newaxis, :, :, :], axis=(1, 2, 3))
    return out


def _maxpool2d(x):
    out = np.empty((x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3]), x.dtype)
    for i in range(x.shape[1] // 2):
        for j in range(x.shape[2] // 2):
            out[:, i, j, :] = np.max(x[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2, :], axis=(1, 2))
    return out


def _relu(x):
    return np.maximum(x, 0)


def lenet(x, c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b, f3w, f3b):
    n = x.shape[0]
    x = _maxpool2d(_relu(_conv2d(x, c1w) + c1b))
    x = _maxpool2d(_relu(_conv2d(x, c2w) + c2b))
    x = x.reshape(n, -1)
    x = _relu(x @ f1w + f1b)
    x = _relu(x @ f2w + f2b)
    return x @ f3w + f3b


def _batchnorm2d(x, eps=1e-5):
    mean = np.mean(x, axis=0, keepdims=True)
    std = np.std(x, axis=0, keepdims=True)
    return (x - mean) / np.sqrt(std + eps)


def resnet_block(x, w1, w2, w3):
    padded = np.zeros((x.shape[0], x.shape[1] + 2, x.shape[2] + 2, w1.shape[3]), x.dtype)
    padded[:, 1:-1, 1:-1, :] = _relu(_batchnorm2d(_conv2d(x, w1)))
    y = _relu(_batchnorm2d(_conv2d(padded, w2)))
    return _relu(_batchnorm2d(_conv2d(y, w3)) + x)

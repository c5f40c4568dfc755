// A unit of the batch-norm stages that cut a channel into blocks (kernels/batchnorm/05_fused.cl,
// 06_one_pass.cl), chapter 14: a float4 when VEC4 (H*W % 4 == 0, so that no float4 straddles two
// slabs), else a float, and the operations on it. Reads VEC4: included after batchnorm.h and the
// stage's VEC4 default.
#ifndef BATCHNORM_UNIT_H
#define BATCHNORM_UNIT_H

#if VEC4
#define UNIT 4
typedef float4 unit_t;
#define LOADU(p, e) LOAD4(p, (e) / 4)
#define STOREU(p, e, v) STORE4(p, (e) / 4, v)
#define GRAD_INU(dy, y, e) GRAD_IN4(dy, y, (e) / 4)
#define SUMU(v) (((v).x + (v).y) + ((v).z + (v).w))
#define DOTU(a, b) dot(a, b)
#define WELFORD_U welford_add4
#else
#define UNIT 1
typedef float unit_t;
#define LOADU(p, e) ((p)[e])
#define STOREU(p, e, v) ((p)[e] = (v))
#define GRAD_INU(dy, y, e) GRAD_IN(dy, y, e)
#define SUMU(v) (v)
#define DOTU(a, b) ((a) * (b))
#define WELFORD_U welford_add
#endif

#endif

/* select.h - k-th order statistic of a float array (quickselect).
 *
 * sel_kth_smallest reorders a[0..n) in place (Hoare partition around a median-of-three pivot)
 * and returns the k-th smallest value, 0-based (k = n - j gives the j-th largest). a must hold
 * no NaN. The value returned is the order statistic whatever the pivots, so every caller gets
 * the same threshold; the order left in a is unspecified. No allocation, no errors, reentrant.
 */
#ifndef SAELITE_SELECT_H
#define SAELITE_SELECT_H
#include <stdint.h>

float sel_kth_smallest(float *a, int64_t n, int64_t k);

#endif

function [pot, grad] = fmmkit_eval(kernel, sources, charges, varargin)
  % fmmkit_eval  Fast N-body sums: potential and gradient of point charges.
  %
  %   pot = fmmkit_eval(kernel, sources, charges)
  %   [pot, grad] = fmmkit_eval(kernel, sources, charges, 'name', value, ...)
  %
  % phi(y_i) = sum_j q_j G(y_i, x_j) at the targets y_i (the sources when no targets are
  % given: the self term j = i left out), and its gradient with respect to y_i when asked for.
  %
  % kernel   'laplace' (3D, 1/r), 'plummer' (3D, 1/sqrt(r^2+s^2)), 'regularized' (3D),
  %          'log2d' (2D, log r), 'cauchy2d' (2D, phi(z) = sum_j q_j/(z_j - z), complex q;
  %          "grad" is dphi/dz, complex). docs/kernels.md defines each exactly.
  % sources  N x dim (a point per row) or dim x N (a point per column); for a 2D kernel also
  %          a complex vector x + iy. A square dim x dim matrix (N == dim) is read as a point
  %          per row. dim x N is fmmkit's own layout: it is not copied.
  % charges  N values (real; complex for cauchy2d).
  %
  % Options (names case-insensitive):
  %   'eps'        relative accuracy, default 1e-6 (1e-4 in fp32)
  %   'targets'    M x dim or dim x M (or complex, 2D): where to evaluate; default the sources
  %   'method'     'auto' (default: direct), 'direct', 'tree' (3D laplace, plummer), 'fmm'
  %   'backend'    'auto' (default: CUDA when built and a GPU is present), 'cpu', 'cuda'
  %   'precision'  'fp64' (default) or 'fp32' ('double', 'single')
  %   'softening'  s > 0 for plummer and regularized
  %   'theta'      opening angle of method tree (default 0.6)
  %   'order', 'leaf_size', 'threads', 'device', 'walk': expert settings (docs/choosing.md)
  %
  % Results follow the layout of the targets (or of the sources): a point per row gives pot
  % M x 1 and grad M x dim; a point per column gives pot 1 x M and grad dim x M; a complex
  % vector gives vectors of its shape. cauchy2d: pot and grad complex, one value per target.
  %
  % Errors carry identifiers: fmmkit:arg (a bad argument, shape, option or kernel name),
  % fmmkit:nonfinite (NaN or Inf), fmmkit:unavailable (method/backend not in this build),
  % fmmkit:accuracy (eps out of reach on these points), fmmkit:nomem, fmmkit:interrupted
  % (Ctrl-C), fmmkit:state, fmmkit:device, fmmkit:internal. See docs/octave.md.
  %
  % Example:
  %   S = rand(1e5, 3); q = randn(1e5, 1);
  %   [pot, grad] = fmmkit_eval('laplace', S, q, 'method', 'fmm', 'eps', 1e-8);
  if nargin < 3
    error('fmmkit:arg', 'usage: [pot, grad] = fmmkit_eval(kernel, sources, charges, ''name'', value, ...)');
  end
  if nargout > 1
    [pot, grad] = fmmkit_mex('eval', kernel, sources, charges, varargin{:});
  else
    pot = fmmkit_mex('eval', kernel, sources, charges, varargin{:});
  end
end

function nfail = fmmkit_tests()
  % The Octave interface against known values and sums computed here: every kernel, both point
  % layouts, targets or none, eps met by fmm and tree, every error path with its identifier,
  % and the plan handle's life cycle. Returns the number of failed checks (run.sh exits with
  % it). Small sizes: the whole file runs in seconds on two busy cores.
  rand('seed', 1); randn('seed', 2);
  cases = {@known_values, @layouts, @targets_or_none, @against_octave_sums, @accuracy, ...
           @complex_cauchy, @errors, @plan_life_cycle, @plan_errors};
  nfail = 0;
  for i = 1:numel(cases)
    name = func2str(cases{i});
    try
      cases{i}();
      printf('ok   %s\n', name);
    catch e
      printf('FAIL %s: %s (%s)\n', name, e.message, e.identifier);
      nfail = nfail + 1;
    end
  end
  if fmmkit_mex('plans_alive') ~= 0
    printf('FAIL %d plans left alive\n', fmmkit_mex('plans_alive'));
    nfail = nfail + 1;
  end
  printf('%d of %d groups failed\n', nfail, numel(cases));
end

function check(cond, varargin)
  if ~cond
    error('test:fail', varargin{:});
  end
end

function e = rel(a, b)
  e = norm(a(:) - b(:)) / norm(b(:));
end

% The error of a call, or '' when it succeeds.
function id = error_of(f)
  id = '';
  try
    f();
  catch e
    id = e.identifier;
  end
end

function expect_error(id, f, what)
  got = error_of(f);
  check(strcmp(got, id), '%s: expected %s, got ''%s''', what, id, got);
end

function known_values()
  v = fmmkit_version();
  check(ischar(v) && ~isempty(regexp(v, '^\d+\.\d+\.\d+$', 'once')), 'version %s', v);
  % two unit charges 1 apart, q = [1 2]: pot = [2 1], grad at 0 = +2 e_x, at 1 = -1 e_x
  [p, g] = fmmkit_eval('laplace', [0 0 0; 1 0 0], [1; 2]);
  check(isequal(p, [2; 1]) && isequal(g, [2 0 0; -1 0 0]), 'laplace two points');
  % log2d: log 2 at distance 2; plummer with s = 1 at distance 1: 1/sqrt(2)
  p = fmmkit_eval('log2d', [0 0; 2 0], [1; 1]);
  check(abs(p(1) - log(2)) < 1e-15 && abs(p(2) - log(2)) < 1e-15, 'log2d two points');
  p = fmmkit_eval('plummer', [0 0 0; 0 1 0], [1; 1], 'softening', 1);
  check(abs(p(1) - 1 / sqrt(2)) < 1e-15, 'plummer two points');
  % cauchy2d: Gamma = i at 1 + i seen from 0: i / (1 + i) = (1 + i) / 2
  [p, d] = fmmkit_eval('cauchy2d', [0; 1 + 1i], [1; 1i]);
  check(abs(p(1) - (0.5 + 0.5i)) < 1e-15 && abs(d(1) - 1i / (1 + 1i)^2) < 1e-15, 'cauchy2d');
  % no sources: zeros at the targets; no targets: empty results
  p = fmmkit_eval('laplace', zeros(0, 3), [], 'targets', [1 2 3]);
  check(isequal(p, 0), 'no sources');
  [p, g] = fmmkit_eval('laplace', rand(5, 3), ones(5, 1), 'targets', zeros(0, 3));
  check(isempty(p) && isempty(g), 'no targets');
end

function layouts()
  S = rand(40, 3); q = randn(40, 1); T = rand(7, 3);
  [p1, g1] = fmmkit_eval('laplace', S, q, 'targets', T);
  [p2, g2] = fmmkit_eval('laplace', S', q', 'targets', T');
  check(isequal(size(p1), [7 1]) && isequal(size(g1), [7 3]), 'rows: sizes');
  check(isequal(size(p2), [1 7]) && isequal(size(g2), [3 7]), 'columns: sizes');
  check(isequal(p1, p2') && isequal(g1, g2'), 'rows and columns agree');
  % the results follow the targets' layout; a 3 x 3 matrix is three points, one per row
  [p3, g3] = fmmkit_eval('laplace', S', q, 'targets', T);
  check(isequal(p3, p1) && isequal(g3, g1), 'mixed layouts');
  S3 = rand(3, 3); q3 = [1; 2; 3];
  check(rel(fmmkit_eval('laplace', S3, q3), octave_laplace(S3, q3, S3)) < 1e-14, ...
        'N == 3 is a point per row');
  % 2D points as N x 2, 2 x N and complex x + iy
  P = rand(30, 2); c = randn(30, 1);
  [a, ga] = fmmkit_eval('log2d', P, c);
  [b, gb] = fmmkit_eval('log2d', P', c);
  [z, gz] = fmmkit_eval('log2d', P(:, 1) + 1i * P(:, 2), c);
  check(isequal(a, b', z) && isequal(ga, gb', gz), 'log2d layouts');
end

function targets_or_none()
  S = rand(50, 3); q = randn(50, 1);
  [p, g] = fmmkit_eval('laplace', S, q);
  [pt, gt] = fmmkit_eval('laplace', S, q, 'targets', S);
  % at the sources the self term is left out (by index, or as a coincident point): the same
  check(rel(p, pt) < 1e-14 && rel(g, gt) < 1e-14, 'targets = sources');
  check(isequal(fmmkit_eval('laplace', S, q, 'targets', []), zeros(0, 1)), 'targets []');
end

% The sums written out in Octave.
function [pot, grad] = octave_laplace(S, q, T)
  pot = zeros(size(T, 1), 1); grad = zeros(size(T, 1), 3);
  for i = 1:size(T, 1)
    d = T(i, :) - S; r = sqrt(sum(d .^ 2, 2)); w = q ./ r; w(r == 0) = 0;
    pot(i) = sum(w);
    w3 = q ./ r .^ 3; w3(r == 0) = 0;
    grad(i, :) = -sum(w3 .* d, 1);
  end
end

function against_octave_sums()
  S = rand(200, 3); q = randn(200, 1); T = rand(30, 3);
  [p, g] = fmmkit_eval('laplace', S, q, 'targets', T);
  [pr, gr] = octave_laplace(S, q, T);
  check(rel(p, pr) < 1e-13 && rel(g, gr) < 1e-13, 'laplace vs Octave: %g %g', rel(p, pr), ...
        rel(g, gr));
  [p, g] = fmmkit_eval('laplace', S, q);
  [pr, gr] = octave_laplace(S, q, S);
  check(rel(p, pr) < 1e-13 && rel(g, gr) < 1e-13, 'laplace at the sources');
  s = 0.1;
  p = fmmkit_eval('plummer', S, q, 'targets', T, 'softening', s);
  pr = zeros(30, 1);
  for i = 1:30
    pr(i) = sum(q ./ sqrt(sum((T(i, :) - S) .^ 2, 2) + s ^ 2));
  end
  check(rel(p, pr) < 1e-13, 'plummer vs Octave');
  P = rand(100, 2); c = randn(100, 1); Y = rand(20, 2);
  [p, g] = fmmkit_eval('log2d', P, c, 'targets', Y);
  pr = zeros(20, 1); gr = zeros(20, 2);
  for i = 1:20
    d = Y(i, :) - P; r2 = sum(d .^ 2, 2);
    pr(i) = sum(c .* log(sqrt(r2)));
    gr(i, :) = sum(c ./ r2 .* d, 1);
  end
  check(rel(p, pr) < 1e-13 && rel(g, gr) < 1e-13, 'log2d vs Octave');
end

function accuracy()
  n = 3000; S = rand(n, 3); q = randn(n, 1);
  [pd, gd] = fmmkit_eval('laplace', S, q, 'method', 'direct');
  [pf, gf] = fmmkit_eval('laplace', S, q, 'method', 'fmm', 'eps', 1e-6);
  check(rel(pf, pd) < 1e-6 && rel(gf, gd) < 1e-5, 'fmm eps 1e-6: %g %g', rel(pf, pd), ...
        rel(gf, gd));
  pt = fmmkit_eval('laplace', S, q, 'method', 'tree', 'eps', 1e-3);
  check(rel(pt, pd) < 1e-3, 'tree eps 1e-3: %g', rel(pt, pd));
  pt = fmmkit_eval('laplace', S', q, 'method', 'tree', 'theta', 0.3, 'precision', 'fp64');
  check(rel(pt, pd') < 1e-3, 'tree theta 0.3: %g', rel(pt, pd'));
  P = rand(n, 2); c = randn(n, 1) + 1i * randn(n, 1);
  pd = fmmkit_eval('cauchy2d', P, c, 'method', 'direct');
  pf = fmmkit_eval('cauchy2d', P, c, 'method', 'fmm', 'eps', 1e-8);
  check(rel(pf, pd) < 1e-8, 'cauchy2d fmm eps 1e-8: %g', rel(pf, pd));
  p32 = fmmkit_eval('laplace', S, q, 'precision', 'fp32');
  check(rel(p32, fmmkit_eval('laplace', S, q)) < 1e-4, 'fp32');
end

function complex_cauchy()
  z = rand(60, 1) + 1i * rand(60, 1); G = randn(60, 1) + 1i * randn(60, 1);
  w = rand(9, 1) + 1i * rand(9, 1);
  [p, d] = fmmkit_eval('cauchy2d', z, G, 'targets', w);
  pr = zeros(9, 1); dr = zeros(9, 1);
  for i = 1:9
    pr(i) = sum(G ./ (z - w(i))); dr(i) = sum(G ./ (z - w(i)) .^ 2);
  end
  check(~isreal(p) && rel(p, pr) < 1e-13 && rel(d, dr) < 1e-13, 'cauchy2d vs Octave');
  % points as N x 2 and 2 x N, real charges (imaginary part 0), a row of targets
  p2 = fmmkit_eval('cauchy2d', [real(z) imag(z)], G, 'targets', [real(w) imag(w)]);
  check(isequal(p2, p), 'cauchy2d N x 2');
  p3 = fmmkit_eval('cauchy2d', [real(z) imag(z)]', real(G), 'targets', w.');
  check(isequal(size(p3), [1 9]) && ...
        rel(p3, fmmkit_eval('cauchy2d', z, complex(real(G)), 'targets', w).') < 1e-15, ...
        'cauchy2d real charges, a row of targets');
end

function errors()
  S = rand(10, 3); q = ones(10, 1);
  expect_error('fmmkit:arg', @() fmmkit_eval('laplac', S, q), 'bad kernel');
  expect_error('fmmkit:arg', @() fmmkit_eval(3, S, q), 'kernel not a string');
  Sn = S; Sn(4, 2) = NaN;
  expect_error('fmmkit:nonfinite', @() fmmkit_eval('laplace', Sn, q), 'NaN source');
  qn = q; qn(3) = Inf;
  expect_error('fmmkit:nonfinite', @() fmmkit_eval('laplace', S, qn), 'Inf charge');
  expect_error('fmmkit:nonfinite', @() fmmkit_eval('laplace', S, q, 'targets', [NaN 0 0]), ...
               'NaN target');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', rand(10, 4), q), 'points 10 x 4');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', rand(2, 3, 2), q), '3-D array');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, ones(9, 1)), 'charges 9 for 10');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, ones(5, 2)), 'charges 5 x 2');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'targets', rand(4, 2)), ...
               'targets 4 x 2');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'colour', 1), 'unknown option');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'eps'), 'option with no value');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'eps', 0), 'eps 0');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'eps', [1e-3 1e-4]), 'eps vector');
  expect_error('fmmkit:nonfinite', @() fmmkit_eval('laplace', S, q, 'eps', NaN), 'eps NaN');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'method', 'fast'), 'method');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'backend', 'gpu'), 'backend');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'precision', 'half'), 'precision');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 'order', 2.5), 'order 2.5');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q, 3, 1), 'option name a number');
  expect_error('fmmkit:arg', @() fmmkit_eval('plummer', S, q), 'plummer without softening');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S, q + 1i), 'complex laplace charges');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', single(S), q), 'single points');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', sparse(S), q), 'sparse points');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S(:, 1) + 1i, q), 'complex 3D points');
  expect_error('fmmkit:arg', @() fmmkit_eval('laplace', S), 'two arguments');
  expect_error('fmmkit:unavailable', @() fmmkit_eval('log2d', rand(10, 2), q, 'method', ...
               'tree'), 'tree in 2D');
  expect_error('fmmkit:unavailable', @() fmmkit_eval('laplace', S, q, 'method', 'tree', ...
               'eps', 1e-9), 'tree at eps 1e-9');
  expect_error('fmmkit:arg', @() fmmkit_mex('no_such_command'), 'gateway command');
  % the message is the library's sentence
  try
    fmmkit_eval('laplace', Sn, q);
  catch e
    check(~isempty(strfind(e.message, 'finite')), 'message: %s', e.message);
  end
  check(fmmkit_mex('plans_alive') == 0, 'no plan left by the failed calls');
end

function plan_life_cycle()
  S = rand(300, 3); q = randn(300, 1); T = rand(20, 3);
  p = fmmkit_plan('laplace', 'eps', 1e-8, 'method', 'fmm');
  check(isa(p, 'fmmkit.Plan') && p.is_valid() && strcmp(p.kernel, 'laplace'), 'made');
  fmmkit_plan_set_points(p, S);
  [a, g] = fmmkit_plan_eval(p, q);
  [ad, gd] = fmmkit_eval('laplace', S, q);
  check(rel(a, ad) < 1e-8 && rel(g, gd) < 1e-7, 'plan fmm vs direct');
  % new charges, then new points with targets in columns
  b = p.eval(2 * q);
  check(rel(b, 2 * a) < 1e-12, 'linear in the charges');
  p.set_points(S', T');
  [c, gc] = p.eval(q);
  check(isequal(size(c), [1 20]) && isequal(size(gc), [3 20]), 'columns after set_points');
  s = p.info();
  check(strcmp(s.method, 'fmm') && s.n_sources == 300 && s.n_targets == 20, 'info');
  % a copy is the same plan (a handle); destroy frees it for both; twice is fine
  r = p;
  fmmkit_plan_destroy(p);
  fmmkit_plan_destroy(p);
  r.destroy();
  check(~r.is_valid(), 'copy destroyed too');
  expect_error('fmmkit:state', @() r.eval(q), 'eval after destroy');
  expect_error('fmmkit:state', @() r.set_points(S), 'set_points after destroy');
  expect_error('fmmkit:state', @() r.info(), 'info after destroy');
  expect_error('fmmkit:state', @() fmmkit_mex('plan_eval', 12345, q), 'a number no plan had');
  fmmkit_mex('plan_destroy', 12345);  % destroying what is not there: nothing happens
  % clearing the last copy frees the plan (delete)
  before = fmmkit_mex('plans_alive');
  p2 = fmmkit.Plan('log2d');
  check(fmmkit_mex('plans_alive') == before + 1, 'one more alive');
  clear p2
  check(fmmkit_mex('plans_alive') == before, 'clear frees');
  for k = 1:3
    p3 = fmmkit.Plan('laplace');  % each assignment frees the plan it replaces
  end
  check(fmmkit_mex('plans_alive') == before + 1, 'reassignment frees');
  clear p3
end

function plan_errors()
  expect_error('fmmkit:arg', @() fmmkit_plan('nope'), 'plan kernel');
  expect_error('fmmkit:arg', @() fmmkit_plan('laplace', 'targets', rand(3)), 'targets option');
  expect_error('fmmkit:unavailable', @() fmmkit_plan('cauchy2d', 'method', 'tree'), 'tree 2D');
  expect_error('fmmkit:arg', @() fmmkit_plan_eval(42, 1), 'not a plan');
  p = fmmkit_plan('plummer', 'softening', 0.01);
  expect_error('fmmkit:state', @() p.eval(ones(3, 1)), 'eval before set_points');
  expect_error('fmmkit:arg', @() p.set_points(rand(5, 2)), 'plan points 5 x 2');
  expect_error('fmmkit:nonfinite', @() p.set_points([0 0 0; NaN 1 1]), 'plan NaN');
  p.set_points(rand(5, 3));
  expect_error('fmmkit:arg', @() p.eval(ones(4, 1)), 'plan charges 4 for 5');
  expect_error('fmmkit:nonfinite', @() p.eval([1; 1; NaN; 1; 1]), 'plan NaN charge');
  check(numel(p.eval(ones(5, 1))) == 5, 'usable after errors');
  p.destroy();
end

classdef Plan < handle
  % fmmkit.Plan  A plan: one kernel and its options, points given once, charges evaluated many
  % times (the geometric work -- trees, lists -- is done by set_points, not by each eval).
  %
  %   p = fmmkit.Plan('laplace', 'eps', 1e-8, 'method', 'fmm');
  %   p.set_points(S);            % sources S (N x 3 or 3 x N); targets = sources
  %   p.set_points(S, T);         % or targets T (M x 3 or 3 x M)
  %   [pot, grad] = p.eval(q);    % as often as you like, new charges each time
  %   info = p.info();            % method, order, levels, times, memory
  %   p.destroy();                % or clear p: the plan is freed when its last copy goes
  %
  % Options as fmmkit_eval's (no 'targets'). The results are held as the points were: a point
  % per row gives pot M x 1 and grad M x 3, a point per column gives 1 x M and 3 x M.
  % After destroy (or on a plan saved and loaded) every call raises fmmkit:state; destroying
  % twice is allowed. See docs/octave.md.

  properties (SetAccess = private)
    kernel = '';  % the kernel's name
  end
  % The gateway's number of the plan, 0 once destroyed. Public though hidden: Octave 7 refuses
  % a class's own methods a private property of an object made before `clear functions`. A
  % number set by hand reaches at worst another live plan, never freed memory.
  properties (Transient = true, Hidden = true)
    id = 0;
  end

  methods
    function obj = Plan(kernel, varargin)
      obj.id = fmmkit_mex('plan_create', kernel, varargin{:});
      obj.kernel = lower(kernel);
    end

    function set_points(obj, sources, targets)
      % p.set_points(sources[, targets]): the points (copied); targets [] or left out: the
      % sources, the self term left out.
      if nargin < 3
        fmmkit_mex('plan_set_points', obj.id, sources);
      else
        fmmkit_mex('plan_set_points', obj.id, sources, targets);
      end
    end

    function [pot, grad] = eval(obj, charges)
      % [pot, grad] = p.eval(charges): one charge per source (complex for cauchy2d); the
      % gradient is computed only when asked for.
      if nargout > 1
        [pot, grad] = fmmkit_mex('plan_eval', obj.id, charges);
      else
        pot = fmmkit_mex('plan_eval', obj.id, charges);
      end
    end

    function s = info(obj)
      % s = p.info(): a struct of what the plan is (method, backend, order, levels, ...) and
      % what its last calls cost (setup_time, eval_time in seconds, bytes_host).
      s = fmmkit_mex('plan_info', obj.id);
    end

    function destroy(obj)
      % p.destroy(): frees the plan now; later calls raise fmmkit:state; a second destroy
      % does nothing.
      if obj.id ~= 0
        fmmkit_mex('plan_destroy', obj.id);
        obj.id = 0;
      end
    end

    function tf = is_valid(obj)
      % tf = p.is_valid(): false once destroyed.
      tf = obj.id ~= 0;
    end

    function delete(obj)
      obj.destroy();
    end
  end
end
